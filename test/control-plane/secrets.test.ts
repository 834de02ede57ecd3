/**
 * Secrets through /v1 with the fake substrate whose channels run the real agent app (its real secrets
 * routes over an in-memory store): store/replace/list/revoke, delivery state, limits, permissions,
 * the keyring turned off, encryption at rest, key rotation through the operator CLI, typing by
 * reference, and a scan of every answer and log line for the values.
 */
import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Hono } from 'hono';
import { sql } from 'kysely';
import type { AgentEnv } from '../../agent/src/app.js';
import { runCli } from '../../control-plane/src/cli.js';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import type { LogLine } from '../../control-plane/src/log.js';
import { assertEnvelope, FAST_SCRYPT } from '../helpers/control-plane.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { rigDatabaseEnv, TEST_ENGINE } from '../helpers/rig-db.js';

const SCOPES = ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'secrets:write'];

async function setup(t: Test, services: Parameters<typeof makeMachinesRig>[0]['services'] = {}, agent: Parameters<typeof fakeSubstrateWithAgents>[0] = {}) {
  const fake = fakeSubstrateWithAgents(agent);
  const serviceLog: LogLine[] = [];
  const rig = await makeMachinesRig({ substrate: fake.substrate, services: { log: (l) => serviceLog.push(l), secretsRetry: { delaysMs: [20, 40], giveUpMs: 5_000 }, ...services } });
  t.teardown(async () => {
    fake.close();
    await rig.close();
  });
  return { fake, rig, serviceLog };
}

async function until<T>(what: string, fn: () => Promise<T | null> | T | null): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** A value no code path could produce by accident, and pieces of it to scan for. */
function uniqueValue(tag: string): string {
  return `v-${tag}-${randomBytes(16).toString('hex')}`;
}

t.test('store, replace, list, revoke: records carry names and versions, the agent gets the values', async (t) => {
  const { rig, fake, serviceLog } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'one' } })).json;
  const m2 = (await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'two' } })).json;
  const base = `/v1/machines/${m.id}/secrets`;
  const v1 = uniqueValue('one');
  const v2 = uniqueValue('two');

  t.same((await rig.call('GET', base, { key: a.key })).json, { data: [] }, 'none yet');
  const put = await rig.call('PUT', base, { key: a.key, body: { name: 'DB_PASSWORD', value: v1 } });
  t.equal(put.status, 200, 'stored');
  t.same(Object.keys(put.json).sort(), ['created_at', 'delivered_at', 'name', 'updated_at', 'version'], 'exactly the record fields: no value');
  t.match(put.json, { name: 'DB_PASSWORD', version: 1, delivered_at: String });
  t.equal(fake.secretsOf(m.id).get('DB_PASSWORD'), v1, 'delivered to the running machine before the answer');

  const replaced = await rig.call('PUT', base, { key: a.key, body: { name: 'DB_PASSWORD', value: v2 } });
  t.equal(replaced.json.version, 2, 'replacing bumps the version');
  t.equal(replaced.json.created_at, put.json.created_at, 'created_at kept');
  t.equal(fake.secretsOf(m.id).get('DB_PASSWORD'), v2, 'the new value replaced the old one in the machine');
  await rig.call('PUT', base, { key: a.key, body: { name: 'API_TOKEN', value: 'x' } });
  await rig.call('PUT', `/v1/machines/${m2.id}/secrets`, { key: a.key, body: { name: 'OTHER', value: 'y' } });

  const list = await rig.call('GET', base, { key: a.key });
  t.same(list.json.data.map((s: any) => [s.name, s.version]), [['API_TOKEN', 1], ['DB_PASSWORD', 2]], 'by name');
  t.ok(list.json.data.every((s: any) => typeof s.delivered_at === 'string'), 'all delivered');
  t.same([...fake.secretsOf(m.id).keys()].sort(), ['API_TOKEN', 'DB_PASSWORD'], 'only this machine\'s secrets in it');

  const org = await rig.call('GET', '/v1/secrets', { key: a.key });
  t.same(org.json.data.map((s: any) => `${s.machine_id}:${s.name}`).sort(), [`${m.id}:API_TOKEN`, `${m.id}:DB_PASSWORD`, `${m2.id}:OTHER`].sort());
  t.equal(org.json.next_cursor, null);
  const p1 = await rig.call('GET', '/v1/secrets?limit=2', { key: a.key });
  t.equal(p1.json.data.length, 2);
  const p2 = await rig.call('GET', `/v1/secrets?limit=2&cursor=${p1.json.next_cursor}`, { key: a.key });
  t.same([...p1.json.data, ...p2.json.data].map((s: any) => s.name).sort(), ['API_TOKEN', 'DB_PASSWORD', 'OTHER'], 'paged without gaps');

  t.equal((await rig.call('DELETE', `${base}/DB_PASSWORD`, { key: a.key })).status, 204, 'revoked');
  t.notOk(fake.secretsOf(m.id).has('DB_PASSWORD'), 'removed from the running machine');
  t.ok(fake.secretsOf(m.id).has('API_TOKEN'), 'the other stays');
  t.same((await rig.call('GET', base, { key: a.key })).json.data.map((s: any) => s.name), ['API_TOKEN']);
  assertEnvelope(t, await rig.call('DELETE', `${base}/DB_PASSWORD`, { key: a.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('DELETE', `${base}/lower_case`, { key: a.key }), 'not_found', 404);

  // Another organization sees none of it.
  const b = await rig.tenant('pro', SCOPES);
  assertEnvelope(t, await rig.call('GET', base, { key: b.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('PUT', base, { key: b.key, body: { name: 'X', value: 'y' } }), 'not_found', 404);
  assertEnvelope(t, await rig.call('DELETE', `${base}/API_TOKEN`, { key: b.key }), 'not_found', 404);
  t.same((await rig.call('GET', '/v1/secrets', { key: b.key })).json.data, []);

  // Deleting a machine deletes its secrets.
  t.equal((await rig.call('DELETE', `/v1/machines/${m2.id}`, { key: a.key })).status, 204);
  t.same((await rig.call('GET', '/v1/secrets', { key: a.key })).json.data.map((s: any) => s.name), ['API_TOKEN']);
  t.same(await rig.store.db.q().selectFrom('machine_secrets').select('id').where('machine_id', '=', m2.id).execute(), [], 'no row left');

  const everything = [...rig.bodies, ...rig.logs.map((l) => JSON.stringify(l)), ...serviceLog.map((l) => JSON.stringify(l))].join('\n');
  for (const v of [v1, v2]) t.notOk(everything.includes(v), 'no answer or log line holds a value');
});

t.test('validation, limits and permissions; no refused value is echoed', async (t) => {
  const { rig, serviceLog } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const base = `/v1/machines/${m.id}/secrets`;
  const marker = uniqueValue('long');
  const tooLong = marker + 'x'.repeat(64 * 1024);

  const long = await rig.call('PUT', base, { key: a.key, body: { name: 'BIG', value: tooLong } });
  assertEnvelope(t, long, 'invalid_request', 400);
  t.same(long.json.error.details, [{ field: 'value', message: 'values are at most 64 KB' }]);
  t.equal((await rig.call('PUT', base, { key: a.key, body: { name: 'EXACT', value: 'é'.repeat(32 * 1024) } })).status, 200, 'exactly 64 KB (UTF-8 bytes) fits');
  for (const [body, field] of [
    [{ name: 'lower', value: marker }, 'name'],
    [{ name: '1ABC', value: marker }, 'name'],
    [{ name: 'A-B', value: marker }, 'name'],
    [{ name: '', value: marker }, 'name'],
    [{ name: 'OK', value: `${marker}\0` }, 'value'],
    [{ name: 'OK', value: 42 }, 'value'],
    [{ name: 'OK' }, 'value'],
    [{ name: 'OK', value: marker, extra: marker }, ''],
  ] as const) {
    const r = await rig.call('PUT', base, { key: a.key, body });
    assertEnvelope(t, r, 'invalid_request', 400);
    if (field) t.ok(r.json.error.details.some((d: any) => d.field === field), `${JSON.stringify(body).slice(0, 40)} → details name ${field}`);
  }
  assertEnvelope(t, await rig.call('PUT', base, { key: a.key, rawBody: `{"name":"OK","value":"${marker}` }), 'invalid_request', 400);

  // Per machine: 100 secrets, 1 MiB of values in total (the whole set travels to the agent at once).
  const ws = 'w'.repeat(60 * 1024);
  for (let i = 0; i < 16; i++) t.equal((await rig.call('PUT', base, { key: a.key, body: { name: `W${i}`, value: ws } })).status, 200);
  const full = await rig.call('PUT', base, { key: a.key, body: { name: 'W16', value: ws } });
  assertEnvelope(t, full, 'conflict', 409);
  t.match(full.json.error.message, /1048576 bytes/);
  t.equal((await rig.call('PUT', base, { key: a.key, body: { name: 'W0', value: ws } })).status, 200, 'replacing one does not count it twice');
  for (let i = 0; i < 17; i++) await rig.call('DELETE', `${base}/W${i}`, { key: a.key });
  await rig.call('DELETE', `${base}/EXACT`, { key: a.key });
  for (let i = 0; i < 100; i++) t.equal((await rig.call('PUT', base, { key: a.key, body: { name: `N${i}`, value: 'v' } })).status, 200);
  assertEnvelope(t, await rig.call('PUT', base, { key: a.key, body: { name: 'N100', value: 'v' } }), 'conflict', 409);
  t.equal((await rig.call('PUT', base, { key: a.key, body: { name: 'N5', value: 'v2' } })).status, 200, 'replacing at the limit');

  // secrets:write gates writes; reads need membership only.
  const reader = await rig.key(a.cookie, ['machines:read']);
  assertEnvelope(t, await rig.call('PUT', base, { key: reader.key, body: { name: 'R', value: marker } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('DELETE', `${base}/N1`, { key: reader.key }), 'permission_denied', 403);
  t.equal((await rig.call('GET', base, { key: reader.key })).status, 200);
  t.equal((await rig.call('GET', '/v1/secrets', { key: reader.key })).status, 200);
  assertEnvelope(t, await rig.call('GET', base), 'unauthenticated', 401);
  assertEnvelope(t, await rig.call('GET', `/v1/machines/mch_${'z'.repeat(24)}/secrets`, { key: a.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('GET', `${base}?x=1`, { key: a.key }), 'invalid_request', 400);

  const everything = [...rig.bodies, ...rig.logs.map((l) => JSON.stringify(l)), ...serviceLog.map((l) => JSON.stringify(l))].join('\n');
  t.notOk(everything.includes(marker), 'no refused value came back in an answer or a log line');
});

t.test('delivery state follows the machine: stored while stopped, delivered at start, cleared by a stop', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { start: false } })).json;
  const base = `/v1/machines/${m.id}/secrets`;
  const put = await rig.call('PUT', base, { key: a.key, body: { name: 'TOKEN', value: 'on-start' } });
  t.equal(put.status, 200, 'a stopped machine takes secrets');
  t.equal(put.json.delivered_at, null, 'not delivered: the machine is stopped');
  t.equal(fake.secretsOf(m.id).size, 0);

  await rig.call('POST', `/v1/machines/${m.id}/start`, { key: a.key });
  const delivered = await until('delivery after start', async () => {
    const s = (await rig.call('GET', base, { key: a.key })).json.data[0];
    return s.delivered_at ? s : null;
  });
  t.equal(delivered.version, 1);
  t.equal(fake.secretsOf(m.id).get('TOKEN'), 'on-start', 'the boot delivered it');

  await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  t.equal((await rig.call('GET', base, { key: a.key })).json.data[0].delivered_at, null, 'a stopped machine holds no secrets');
  // The fake agent outlives a stop (a real machine's tmpfs does not): empty it, as a boot would.
  fake.secretsOf(m.id).clear();
  await rig.call('POST', `/v1/machines/${m.id}/restart`, { key: a.key }).then((r) => t.equal(r.status, 409, 'restart needs a running machine'));
  await rig.call('POST', `/v1/machines/${m.id}/start`, { key: a.key });
  await until('redelivery after the next start', () => (fake.secretsOf(m.id).get('TOKEN') === 'on-start' ? true : null));
  fake.secretsOf(m.id).clear();
  await rig.call('POST', `/v1/machines/${m.id}/restart`, { key: a.key });
  await until('redelivery after restart', () => (fake.secretsOf(m.id).get('TOKEN') === 'on-start' ? true : null));
  t.pass('delivered again after start and after restart');
});

t.test('typed by reference: the stored value reaches the keyboard, never an answer', async (t) => {
  const { rig, fake, serviceLog } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const value = uniqueValue('typed') + " with 'quotes' and ünïcode";
  await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'LOGIN_PASSWORD', value } });
  const sid = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const fence = String((await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: a.key, body: { session_id: sid } })).json.fence);
  const input = { 'x-session-id': sid, 'x-lease-fence': fence };
  const type = `/v1/machines/${m.id}/keyboard/type`;

  const r = await rig.call('POST', type, { key: a.key, body: { secret: 'LOGIN_PASSWORD' }, headers: input });
  t.equal(r.status, 200);
  t.same(Object.keys(r.json).sort(), ['display', 'pointer'], 'the usual input answer');
  t.same(fake.desktopOf(m.id).typed, [value], 'the agent typed the stored value');
  t.equal((await rig.call('POST', type, { key: a.key, body: { text: 'plain' }, headers: input })).status, 200, 'text still works');
  t.same(fake.desktopOf(m.id).typed, [value, 'plain']);

  assertEnvelope(t, await rig.call('POST', type, { key: a.key, body: { secret: 'NOPE' }, headers: input }), 'not_found', 404);
  const both = await rig.call('POST', type, { key: a.key, body: { text: 'x', secret: 'LOGIN_PASSWORD' }, headers: input });
  assertEnvelope(t, both, 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', type, { key: a.key, body: {}, headers: input }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', type, { key: a.key, body: { secret: 'bad-name' }, headers: input }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', type, { key: a.key, body: { secret: 'LOGIN_PASSWORD' } }), 'invalid_request', 400);
  const other = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  assertEnvelope(t, await rig.call('POST', type, { key: a.key, body: { secret: 'LOGIN_PASSWORD' }, headers: { 'x-session-id': other } }), 'conflict', 409);
  t.equal(fake.desktopOf(m.id).typed.length, 2, 'nothing typed without the lease');

  const b = await rig.tenant('pro', SCOPES);
  assertEnvelope(t, await rig.call('POST', type, { key: b.key, body: { secret: 'LOGIN_PASSWORD' }, headers: input }), 'not_found', 404);

  const everything = [...rig.bodies, ...rig.logs.map((l) => JSON.stringify(l)), ...serviceLog.map((l) => JSON.stringify(l))].join('\n');
  t.notOk(everything.includes(value.slice(0, 30)), 'the typed value is in no answer and no log line');
});

t.test('at rest: sealed in the database, and the keyring rotates through the operator CLI', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const values = { ALPHA: uniqueValue('alpha'), BETA: uniqueValue('beta') };
  for (const [name, value] of Object.entries(values)) await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name, value } });

  const keyringFile = path.join(rig.dir, 'secrets-keyring.json');
  t.equal(fs.statSync(keyringFile).mode & 0o777, 0o600, 'the default keyring was created 0600 in DATA_DIR');
  const before = JSON.parse(fs.readFileSync(keyringFile, 'utf8'));
  const rows = () => rig.store.db.q().selectFrom('machine_secrets').select(['name', 'key_id', 'sealed', 'version']).orderBy('name').execute();
  t.same((await rows()).map((r) => r.key_id), [before.active, before.active], 'sealed under the active key');
  if (TEST_ENGINE === 'sqlite') {
    // The whole database file and its WAL, byte for byte.
    await sql`PRAGMA wal_checkpoint(FULL)`.execute(rig.store.db.q());
    for (const f of fs.readdirSync(rig.dir).filter((f) => f.startsWith('control-plane.sqlite'))) {
      const bytes = fs.readFileSync(path.join(rig.dir, f));
      for (const v of Object.values(values)) t.notOk(bytes.includes(Buffer.from(v)), `${f} holds no plaintext value`);
    }
  } else {
    // PostgreSQL's files are the server's: every column of every row as stored (bytea as its bytes, text as UTF-8).
    const stored = await rig.store.db.q().selectFrom('machine_secrets').selectAll().execute();
    t.equal(stored.length, 2);
    const bytes = Buffer.concat(stored.flatMap((r) => Object.values(r).map((c) => (Buffer.isBuffer(c) ? c : Buffer.from(String(c))))));
    for (const v of Object.values(values)) t.notOk(bytes.includes(Buffer.from(v)), 'no machine_secrets row holds a plaintext value');
  }

  const out: string[] = [];
  const code = await runCli(['rotate-secrets-key'], rig.config, (l) => out.push(l));
  t.equal(code, 0, out.join('\n'));
  const after = JSON.parse(fs.readFileSync(keyringFile, 'utf8'));
  t.not(after.active, before.active, 'a new active key');
  t.same(after.keys.map((k: any) => k.id), [after.active], 'the old key retired: nothing uses it');
  t.match(out[0], new RegExp(`active key ${after.active}; re-sealed 2 secret\\(s\\); retired ${before.active}`));
  t.same((await rows()).map((r) => [r.key_id, r.version]), [[after.active, 1], [after.active, 1]], 're-sealed, versions unchanged');
  t.equal(fs.statSync(keyringFile).mode & 0o777, 0o600, 'still 0600');

  // The running server picks the new keyring up: values open (delivery) and new ones seal under it.
  fake.secretsOf(m.id).clear();
  await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'GAMMA', value: 'g' } });
  t.same(Object.fromEntries(fake.secretsOf(m.id)), { ...values, GAMMA: 'g' }, 'every value opens after the rotation');
  t.equal((await rows()).find((r) => r.name === 'GAMMA')!.key_id, after.active);

  // A row under a key the keyring lacks is reported, left alone, and kept out of deliveries.
  await rig.store.db.q().updateTable('machine_secrets').set({ key_id: 'kr_0000000000000000' }).where('name', '=', 'BETA').execute();
  const out2: string[] = [];
  t.equal(await runCli(['rotate-secrets-key'], rig.config, (l) => out2.push(l)), 1);
  t.match(out2[0], /re-sealed 2 secret\(s\).*1 secret\(s\) are sealed under a key this keyring lacks/);
  fake.secretsOf(m.id).clear();
  await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'GAMMA', value: 'g2' } });
  t.same([...fake.secretsOf(m.id).keys()].sort(), ['ALPHA', 'GAMMA'], 'the unreadable one is not delivered');
});

t.test('a lost keyring: 503 while running, and a restart refuses to invent a new one while sealed secrets exist', async (t) => {
  const { rig, fake, serviceLog } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  t.equal((await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'KEPT', value: uniqueValue('kept') } })).status, 200);
  const keyringFile = path.join(rig.dir, 'secrets-keyring.json');
  const saved = `${keyringFile}.saved`;
  fs.renameSync(keyringFile, saved);

  const r = await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'NEW', value: uniqueValue('new') } });
  assertEnvelope(t, r, 'compute_unavailable', 503);
  t.equal(r.json.error.message, "This server's secrets keyring is unavailable or lacks this secret's key; an operator must restore it. Nothing was changed.");
  t.notMatch(r.text, /secrets-keyring|\//, 'the answer names no path');
  t.same((await rig.call('GET', `/v1/machines/${m.id}/secrets`, { key: a.key })).json.data.map((s: { name: string }) => s.name), ['KEPT'], 'nothing was stored');
  t.ok(serviceLog.some((l) => l.event === 'secrets_keyring_unavailable' && l.kind === 'ENOENT'), 'the operator log says why, by kind');
  t.equal(fake.secretsOf(m.id).has('NEW'), false);

  // A restart on this data directory: the database holds a sealed secret and the keyring is gone.
  const config = parseConfig({ ...(await rigDatabaseEnv(rig.dir)), PORT: '0', HOST: '127.0.0.1', DATA_DIR: rig.dir });
  const started = await serve(config, { services: { passwordCost: FAST_SCRYPT }, dashboardDir: null }).then(
    async (running) => {
      await running.close();
      return null;
    },
    (e: Error) => e.message,
  );
  t.equal(
    started,
    `the secrets keyring ${keyringFile} is missing but the database holds 1 secret(s) sealed under it; restore the keyring file from the backup made with the database (or name it with SECRETS_KEYRING). Refusing to create a new keyring, which could open none of them.`,
    'the start is refused with what to do',
  );
  t.notOk(fs.existsSync(keyringFile), 'no new keyring was created');
  const out: string[] = [];
  t.equal(await runCli(['rotate-secrets-key'], rig.config, (l) => out.push(l)), 1, 'nor does the rotation CLI create one');
  t.match(out[0], /is missing but the database holds 1 secret\(s\)/);

  // Restored, everything works again.
  fs.renameSync(saved, keyringFile);
  t.equal((await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'NEW', value: 'n' } })).status, 200);
});

t.test('SECRETS_KEYRING=off: storing is 501, reading and revoking still work', async (t) => {
  const { rig } = await setup(t, { keyring: null });
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const r = await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'X', value: 'y' } });
  assertEnvelope(t, r, 'unsupported_operation', 501);
  t.match(r.json.error.message, /SECRETS_KEYRING=off/);
  assertEnvelope(t, await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'bad' } }), 'unsupported_operation', 501);
  t.same((await rig.call('GET', `/v1/machines/${m.id}/secrets`, { key: a.key })).json, { data: [] });
  t.same((await rig.call('GET', '/v1/secrets', { key: a.key })).json, { data: [], next_cursor: null });
  t.notOk(fs.existsSync(path.join(rig.dir, 'secrets-keyring.json')), 'no keyring file created');
});

t.test('typed by reference against a hostile agent: nothing it echoes gets out', async (t) => {
  // The guest is hostile (its tenant is root): an agent that puts the typed text into its answers.
  let mode: 'error' | 'success' = 'error';
  const hostile = () => {
    const app = new Hono<AgentEnv>();
    app.post('/keyboard/type', async (c) => {
      const { text } = (await c.req.json()) as { text: string };
      if (mode === 'error') {
        return c.json({ error: { code: 'invalid_request', message: `cannot type ${text}`, request_id: 'r', details: [{ field: 'text', message: text }], quota: null } }, 400);
      }
      return c.json({ display: { width: 10, height: 10, up: true, resizable: true }, pointer: null, echoed: text });
    });
    return [app];
  };
  const { rig } = await setup(t, {}, { mountsFirst: hostile });
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const value = uniqueValue('hostile');
  await rig.call('PUT', `/v1/machines/${m.id}/secrets`, { key: a.key, body: { name: 'PW', value } });
  const sid = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: a.key, body: { session_id: sid } });
  const type = `/v1/machines/${m.id}/keyboard/type`;

  const plain = await rig.call('POST', type, { key: a.key, body: { text: 'visible' }, headers: { 'x-session-id': sid } });
  t.match(plain.json.error.message, /cannot type visible/, 'text: the agent answer is relayed as usual');
  const err = await rig.call('POST', type, { key: a.key, body: { secret: 'PW' }, headers: { 'x-session-id': sid } });
  assertEnvelope(t, err, 'invalid_request', 400);
  t.equal(err.json.error.message, 'The machine could not carry out the request with the secret.', 'a fixed message');
  t.same(err.json.error.details, [], 'no details');
  mode = 'success';
  const ok = await rig.call('POST', type, { key: a.key, body: { secret: 'PW' }, headers: { 'x-session-id': sid } });
  t.equal(ok.status, 200);
  t.same(Object.keys(ok.json).sort(), ['display', 'pointer'], 'only the schema fields');
  t.notOk(rig.bodies.join('\n').includes(value), 'the value is in no answer');
});

t.test('a delivery the machine cannot take is acknowledged, logged without the value, and retried', async (t) => {
  const { rig, fake, serviceLog } = await setup(t);
  const a = await rig.tenant('pro', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const base = `/v1/machines/${m.id}/secrets`;
  const value = uniqueValue('retry');
  // The boot's readiness probe dials the agent in the background until the desktop answers: once `machine.ready` is
  // recorded it dials no more, and the failure queued below is the delivery's, not the probe's (on PostgreSQL the
  // probe's store reads take long enough that it used to dial after the failure was queued and take it).
  await until('machine.ready', () =>
    rig.store.db.q().selectFrom('machine_events').select('seq').where('machine_id', '=', m.id).where('type', '=', 'machine.ready').executeTakeFirst().then((r) => r ?? null));
  rig.services.pool.drop(m.id);
  fake.substrate.failNext('openChannel');
  const put = await rig.call('PUT', base, { key: a.key, body: { name: 'LATE', value } });
  t.equal(put.status, 200, 'the store is acknowledged');
  t.equal(put.json.delivered_at, null, 'not delivered yet');
  t.match(serviceLog, [{ event: 'secrets_delivery_failed', machine_id: m.id, operation: 'store', code: 'compute_unavailable' }]);
  await until('the retry', () => (fake.secretsOf(m.id).get('LATE') === value ? true : null));
  const s = await until('delivered_at', async () => (await rig.call('GET', base, { key: a.key })).json.data[0].delivered_at ?? null);
  t.type(s, 'string', 'recorded once the retry delivered it');

  // A revoke whose push fails is retried too, and a late retry never removes a value stored again since.
  rig.services.pool.drop(m.id);
  fake.substrate.failNext('openChannel');
  t.equal((await rig.call('DELETE', `${base}/LATE`, { key: a.key })).status, 204, 'gone from storage at once');
  await until('the revoke retry', () => (fake.secretsOf(m.id).has('LATE') ? null : true));
  rig.services.pool.drop(m.id);
  fake.substrate.failNext('openChannel');
  await rig.call('DELETE', `${base}/LATE`, { key: a.key }).then((r) => t.equal(r.status, 404));
  await rig.call('PUT', base, { key: a.key, body: { name: 'LATE', value: 'again' } });
  await until('the new value', () => (fake.secretsOf(m.id).get('LATE') === 'again' ? true : null));
  t.notOk(JSON.stringify(serviceLog).includes(value), 'no log line holds the value');
});

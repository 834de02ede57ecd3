/**
 * The move-up command (admin/move-up.ts) on a real SQLite DATA_DIR and a real, throwaway PostgreSQL: refused while a
 * control plane serves the DATA_DIR, a copy whose counts and checksums agree, rows read back identical, identity
 * sequences past the copied ids, a second run refused (not empty), a changed row found by --verify.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { canonicalRow, COPY_PLAN } from '../../../control-plane/src/admin/table-digest.js';
import { runMoveUp } from '../../../control-plane/src/admin/move-up.js';
import { parseConfig } from '../../../control-plane/src/config.js';
import { serve } from '../../../control-plane/src/main.js';
import { openDb } from '../../../control-plane/src/store/db.js';
import { openPostgres } from '../../../control-plane/src/store/engine/postgres.js';
import { openSqliteEngine } from '../../../control-plane/src/store/engine/sqlite.js';
import { FAST_SCRYPT } from '../../helpers/control-plane.js';
import { startPostgres } from '../../helpers/postgres.js';
import { LEGACY_MIGRATIONS } from '../store/legacy-migrations.js';

const TS = '2026-01-01T00:00:00.000Z';
const LATER = '2026-02-01T00:00:00.000Z';
const SEALED = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const BIG = 2 ** 53 - 1;

/** One row or more in every table (ids chosen so that byte order and a locale's order differ: Z < _ < a). */
async function populate(file: string): Promise<void> {
  const db = openSqliteEngine(file);
  try {
    const org = 'org_alpha';
    await db.insertInto('organizations').values([
      { id: org, name: 'Ünïcode ☃ "quoted"\n', personal: 0, created_at: TS },
      { id: 'org_Zeta', name: 'z', personal: 1, created_at: TS },
      { id: 'org__x', name: '', personal: 0, created_at: TS },
    ]).execute();
    await db.insertInto('users').values({ id: 'usr_1', email: 'a@example.com', name: null, password_hash: 'ph', personal_org_id: 'org_Zeta', created_at: TS }).execute();
    await db.insertInto('memberships').values({ id: 'mem_1', org_id: org, user_id: 'usr_1', role: 'owner', created_at: TS }).execute();
    await db.insertInto('invitations').values({
      id: 'inv_1', org_id: org, email: 'b@example.com', role: 'member', state: 'pending', token_hash: 'ith', invited_by: 'usr_1',
      created_at: TS, expires_at: LATER, accepted_at: null, accepted_by: null, revoked_at: null,
    }).execute();
    await db.insertInto('api_keys').values({
      id: 'key_1', org_id: org, created_by: 'usr_1', name: 'ci', prefix: 'sk_abc', secret_hash: 'ksh', scopes: '["machines:read"]',
      created_at: TS, last_used_at: null, revoked_at: null,
    }).execute();
    await db.insertInto('auth_sessions').values({
      id: 'aus_1', user_id: 'usr_1', token_hash: 'ath', active_org_id: org, created_at: TS, last_used_at: TS, expires_at: LATER, revoked_at: null,
    }).execute();
    await db.insertInto('rate_limits').values({ bucket: 'login:192.0.2.1', window_start_ms: 1767225600000, count: 3 }).execute();
    await db.insertInto('billing_accounts').values({
      org_id: org, state: 'active', plan_id: 'pro', catalog_version: '1', provider: 'builtin', trial_ends_at: null, period_start: TS, period_end: LATER, updated_at: TS,
    }).execute();
    await db.insertInto('billing_events').values({ id: 'bev_1', org_id: org, type: 'payment_succeeded', from_state: 'trialing', to_state: 'active', created_at: TS }).execute();
    await db.insertInto('billing_links').values({ token_hash: 'blh', kind: 'checkout', org_id: org, plan_id: 'pro', return_url: null, created_at: TS, expires_at: LATER, used_at: null }).execute();
    await db.insertInto('entitlement_overrides').values({ id: 'eo_1', org_id: org, entitlements: '{"machines":9}', effective_from: TS, effective_until: null, created_at: TS }).execute();
    await db.insertInto('hosts').values({
      id: 'host_1', region: 'default', state: 'active', epoch: 3, internal_url: null, capacity: '{"cores":2,"memory_bytes":1,"disk_bytes":1,"machines":{}}',
      heartbeat_at: TS, created_at: TS, updated_at: TS,
    }).execute();
    await db.insertInto('machines').values({
      host_id: 'host_1', id: 'mch_1', org_id: org, name: 'box', size: 'standard', template: null, region: null, metadata: '{"k":"v"}', state: 'running',
      agent_token: 'agent-token-value', created_by_kind: 'user', created_by_id: 'usr_1', created_at: TS, updated_at: TS, state_changed_at: TS, deleted_at: null,
    }).execute();
    await db.insertInto('sessions').values({
      id: 'ses_1', org_id: org, machine_id: 'mch_1', type: 'agent', state: 'active', opener_kind: 'api_key', opener_id: 'key_1', created_at: TS, closed_at: null, last_active_at: TS,
    }).execute();
    await db.insertInto('input_leases').values({ machine_id: 'mch_1', session_id: 'ses_1', fence: 7, expires_at: 1767225600000, updated_at: TS }).execute();
    for (const n of [1, 2, 3]) {
      await db.insertInto('machine_events').values({ id: `evt_${n}`, org_id: org, machine_id: 'mch_1', type: 'machine.state', data: `{"n":${n}}`, created_at: TS }).execute();
    }
    // AUTOINCREMENT has handed out 3; the copy's next seq must be 4, not 3.
    await db.deleteFrom('machine_events').where('seq', '=', 3).execute();
    await db.insertInto('snapshots').values({
      id: 'snp_1', org_id: org, machine_id: 'mch_1', name: 's', state: 'ready', origin: 'manual', layer_id: 'lyr_1', size_bytes: 123456789012, created_at: TS, completed_at: TS,
    }).execute();
    await db.insertInto('templates').values({
      id: 'tpl_1', org_id: org, name: 't', state: 'ready', source: 'snapshot', size: 'small', snapshot_id: 'snp_1', machine_id: null, layer_id: 'lyr_2', size_bytes: 5, created_at: TS, completed_at: null,
    }).execute();
    await db.insertInto('machine_secrets').values({
      id: 'sec_1', org_id: org, machine_id: 'mch_1', name: 'TOKEN', version: 2, key_id: 'k1', sealed: SEALED, value_bytes: 32,
      created_at: TS, updated_at: TS, delivered_at: null, delivered_version: null, delivered_boot: null,
    }).execute();
    await db.insertInto('previews').values({
      id: 'prv_1', org_id: org, machine_id: 'mch_1', port: 8080, name: null, access: 'private', secret_hash: null, access_token_hash: null, cookie_hash: null,
      last_request_at: null, created_at: TS, deleted_at: null,
    }).execute();
    await db.insertInto('usage_records').values({
      id: 'use_1', org_id: org, source_id: 'mch_1', machine_id: 'mch_1', template_id: null, meter: 'compute_standard_seconds', size: 'standard', hour: TS, quantity: BIG, updated_at: TS,
    }).execute();
    await db.insertInto('meter_cursors').values({ source_id: 'mch_1', kind: 'machine', metered_until: TS }).execute();
    await db.insertInto('usage_summaries').values({ org_id: org, period_start: TS, body: '{}', created_at: TS }).execute();
    await db.insertInto('stripe_customers').values({ org_id: org, customer_id: 'cus_1', subscription_id: null, last_event_created: 1767225600, created_at: TS }).execute();
    await db.insertInto('stripe_webhook_events').values({ id: 'evt_stripe_1', type: 'invoice.paid', org_id: null, outcome: 'applied', received_at: TS }).execute();
    await db.insertInto('stripe_meter_reports').values({ org_id: org, period_start: TS, period_end: LATER, meter: 'computer_compute', reported: 10, pending: null, closed: 0 }).execute();
    await db.insertInto('volume_restarts').values({ machine_id: 'mch_1', stopped_at: null }).execute();
    await db.insertInto('cluster_keys').values({ name: 'internal-channel', key: SEALED, created_at: TS }).execute();
  } finally {
    await db.destroy();
  }
}

t.test('canonical row: columns sorted, bytes as hex, integers and null as JSON', async (t) => {
  t.equal(
    canonicalRow('t', { z: null, b: Buffer.from([0, 15, 255]), a: 'x"\n', n: BIG }),
    '[["a","x\\"\\n"],["b",{"bytes":"000fff"}],["n",9007199254740991],["z",null]]\n',
  );
  t.throws(() => canonicalRow('t', { n: 1.5 }), /t\.n: 1\.5 is not an integer/);
  t.throws(() => canonicalRow('t', { d: new Date(0) }), /t\.d: a value of type object has no canonical form/);
});

t.test('the plan covers every table of a fresh SQLite file', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'move-up-plan-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db = openSqliteEngine(path.join(dir, 'x.sqlite'));
  const { rows } = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'sqlite_sequence' ORDER BY name`.execute(db);
  await db.destroy();
  t.same(COPY_PLAN.map((p) => p.table).sort(), rows.map((r) => r.name));
});

t.test('move-up: SQLite DATA_DIR → empty PostgreSQL', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'move-up-data-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const server = await startPostgres();
  t.teardown(server.stop);
  const run = async (...args: string[]) => {
    const lines: string[] = [];
    const code = await runMoveUp(args, (l) => lines.push(l));
    return { code, text: lines.join('\n'), lines };
  };
  const to = server.url;

  // A real control plane serves the DATA_DIR (its rows: a signup over HTTP): the command is refused.
  const running = await serve(parseConfig({ PORT: '18281', HOST: '127.0.0.1', DATA_DIR: dataDir }), { log: () => {}, services: { passwordCost: FAST_SCRYPT }, dashboardDir: null });
  const signup = await fetch(`${running.url}/v1/auth/signup`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'served@example.com', password: 'a long enough password' }),
  });
  t.equal(signup.status, 201);
  const busy = await run('--data-dir', dataDir, '--to', to);
  t.equal(busy.code, 2);
  t.equal(busy.text, `move-up: refused: ${dataDir} is in use (a control plane, or another command, has its database open): stop it, then run move-up again`);
  await running.close();

  await populate(path.join(dataDir, 'control-plane.sqlite'));
  const copied = await run('--data-dir', dataDir, '--to', to, '--batch', '2');
  t.equal(copied.code, 0, copied.text);
  t.equal(copied.lines.length, 1 + COPY_PLAN.length + 1);
  t.equal(copied.lines.at(-1), `move-up: copied ${copied.lines.slice(1, -1).reduce((n, l) => n + Number(l.split(/\s+/)[1]), 0)} rows in 28 tables, every table verified`);
  const byTable = new Map(copied.lines.slice(1, -1).map((l) => {
    const [table, lite, pg, sum, both, verdict] = l.split(/\s+/);
    return [table!, { lite: Number(lite), pg: Number(pg), sum, both, verdict }];
  }));
  for (const plan of COPY_PLAN) {
    const r = byTable.get(plan.table)!;
    t.ok(r.lite >= 1 && r.lite === r.pg, `${plan.table}: ${r.lite} rows on both sides`);
    t.match(r.sum, /^[0-9a-f]{64}$/);
    t.same([r.both, r.verdict], ['(both)', 'ok'], `${plan.table}: one checksum on both sides`);
  }
  // The tables only populate() wrote: their counts literally (the signup's are in users, organizations, …).
  t.same(['organizations', 'machine_events', 'machine_secrets', 'usage_records', 'machines'].map((n) => byTable.get(n)!.lite), [4, 2, 1, 1, 1]);
  t.match(copied.lines[0], /^table\s+sqlite rows\s+postgres rows\s+sqlite sha256 \/ postgres sha256$/);
  t.notMatch(copied.text, 'postgres://', 'the URL is never printed');

  const pg = await openPostgres(to, { max: 1 });
  t.teardown(() => pg.close());
  // A spot row read back identical, bytes and a 2^53-1 integer included.
  t.same(await pg.db.selectFrom('machine_secrets').selectAll().execute(), [{
    id: 'sec_1', org_id: 'org_alpha', machine_id: 'mch_1', name: 'TOKEN', version: 2, key_id: 'k1', sealed: SEALED, value_bytes: 32,
    created_at: TS, updated_at: TS, delivered_at: null, delivered_version: null, delivered_boot: null,
  }]);
  t.equal((await pg.db.selectFrom('usage_records').select('quantity').executeTakeFirstOrThrow()).quantity, BIG);
  t.same(await pg.db.selectFrom('machine_events').select(['seq', 'id']).orderBy('seq').execute(), [{ seq: 1, id: 'evt_1' }, { seq: 2, id: 'evt_2' }]);

  // A second run: refused, nothing changed.
  const again = await run('--data-dir', dataDir, '--to', to);
  t.equal(again.code, 2);
  t.match(again.text, /^move-up: refused: the PostgreSQL database is not empty \(rows in users, organizations, memberships, .*volume_restarts, cluster_keys\): move-up copies only into an empty database$/);
  t.equal((await sql<{ n: number }>`SELECT count(*)::int AS n FROM machine_events`.execute(pg.db)).rows[0]!.n, 2);

  t.equal((await run('--data-dir', dataDir, '--to', to, '--verify')).code, 0, 'the untouched copy verifies');
  await pg.db.updateTable('machines').set({ name: 'tampered' }).where('id', '=', 'mch_1').execute();
  const verify = await run('--data-dir', dataDir, '--to', to, '--verify');
  t.equal(verify.code, 1);
  t.equal(verify.lines.at(-1), 'move-up: MISMATCH: the PostgreSQL copy differs from the SQLite file');
  t.same(verify.lines.filter((l) => l.endsWith('MISMATCH')).map((l) => l.split(/\s+/)[0]), ['machines'], 'only the changed table differs');

  // The identity sequence continues past what SQLite had issued (3, one since deleted).
  const next = await pg.db
    .insertInto('machine_events')
    .values({ id: 'evt_new', org_id: 'org_alpha', machine_id: 'mch_1', type: 'machine.state', data: '{}', created_at: TS })
    .returning('seq')
    .executeTakeFirstOrThrow();
  t.equal(next.seq, 4);
});

t.test('move-up: a DATA_DIR left by an older release is migrated forward first, then copied', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'move-up-old-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const file = path.join(dataDir, 'control-plane.sqlite');
  // Version 9 as shipped, with a snapshot whose origin is `restore` (version 10 makes it `stop`).
  const old = new Database(file);
  for (const m of LEGACY_MIGRATIONS.filter((m) => m.version <= 9)) old.exec(`${m.sql};\nPRAGMA user_version = ${m.version};`);
  old.exec(`INSERT INTO organizations (id, name, personal, created_at) VALUES ('org_1', 'a', 1, '${TS}');
    INSERT INTO snapshots (id, org_id, machine_id, name, state, origin, layer_id, size_bytes, created_at, completed_at)
      VALUES ('snp_1', 'org_1', 'mch_gone', 'before restore', 'ready', 'restore', NULL, 42, '${TS}', '${TS}');`);
  old.close();
  const server = await startPostgres();
  t.teardown(server.stop);
  const lines: string[] = [];
  t.equal(await runMoveUp(['--data-dir', dataDir, '--to', server.url], (l) => lines.push(l)), 0, lines.join('\n'));
  const after = new Database(file, { readonly: true });
  t.equal(after.pragma('user_version', { simple: true }), 13, 'the SQLite file is at the current version');
  after.close();
  const pg = await openPostgres(server.url, { max: 1 });
  t.teardown(() => pg.close());
  t.same(await pg.db.selectFrom('snapshots').select(['id', 'origin', 'size_bytes']).execute(), [{ id: 'snp_1', origin: 'stop', size_bytes: 42 }]);
});

t.test('while the command holds DATA_DIR, a control plane cannot open its database', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'move-up-held-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'control-plane.sqlite');
  await openDb(file).close();
  // What move-up's openSource does: the exclusive connection, then its transaction held.
  const held = openSqliteEngine(file, { exclusive: true });
  await sql`BEGIN EXCLUSIVE`.execute(held);
  t.throws(() => openDb(file), { code: 'SQLITE_BUSY' }, "the server's open (store/db.ts) is refused");
  await sql`ROLLBACK`.execute(held);
  await held.destroy();
  await openDb(file).close();
  t.pass('and opens once the command has ended');
});

t.test('move-up: usage and refusals that copy nothing', async (t) => {
  const lines: string[] = [];
  t.equal(await runMoveUp(['--data-dir', '/nonexistent'], (l) => lines.push(l)), 2);
  t.equal(await runMoveUp(['--data-dir', '/tmp', '--to', 'mysql://u:secret@h/db'], (l) => lines.push(l)), 2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'move-up-none-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  t.equal(await runMoveUp(['--data-dir', dir, '--to', 'postgres://u:secret@127.0.0.1:1/db'], (l) => lines.push(l)), 2);
  t.same(lines, [
    'usage: move-up --data-dir <DATA_DIR> --to <postgres://…> [--verify] [--batch <rows>]',
    'move-up: refused: --to must be a postgres:// or postgresql:// URL',
    `move-up: refused: no SQLite deployment at ${dir}/control-plane.sqlite`,
  ]);
  t.same(fs.readdirSync(dir), [], 'no database file was created');
});

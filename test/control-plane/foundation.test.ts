/** Store, configuration, password hashing, pure domain rules and import boundaries. */
import t from 'tap';
import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SCRYPT_COST, hashPassword, verifyPassword } from '../../control-plane/src/auth/passwords.js';
import { readSessionCookie } from '../../control-plane/src/auth/cookies.js';
import { parseConfig, isRecognisedOrigin } from '../../control-plane/src/config.js';
import { BILLING_TRANSITIONS, nextBillingState, PROVIDER_EVENTS } from '../../control-plane/src/domain/billing-account.js';
import { CATALOG, catalogAt, type CatalogVersion } from '../../control-plane/src/domain/catalog.js';
import { backoffWait, rateAfterHit, rateDecision, type BackoffRule } from '../../control-plane/src/domain/rate-limits.js';
import { sql } from 'kysely';
import { openDb, schemaVersion, type Db } from '../../control-plane/src/store/db.js';
import { MIGRATIONS } from '../../control-plane/src/store/engine/migrations.js';
import { LEGACY_MIGRATIONS } from './store/legacy-migrations.js';
import { makeRig } from '../helpers/control-plane.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** SQLite's own statements (PRAGMAs, its catalog), which no query builder spells: their rows. */
async function sqlite<T = unknown>(db: Db, text: string): Promise<T[]> {
  return (await sql.raw<T>(text).execute(db.q())).rows;
}

t.test('migration 10: a data dir with "Before restore" rows of origin restore migrates in place to origin stop', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-db-v9-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'x.sqlite');
  // A database as the previous release left it: schema version 9, snapshots of all four old origins.
  const old = new Database(file);
  for (const m of LEGACY_MIGRATIONS.filter((m) => m.version <= 9)) old.exec(m.sql);
  old.pragma('user_version = 9');
  old.exec("INSERT INTO organizations (id, name, personal, created_at) VALUES ('org_a','a',0,'2026-01-01T00:00:00.000Z')");
  const ins = old.prepare('INSERT INTO snapshots (id,org_id,machine_id,name,state,origin,layer_id,size_bytes,created_at,completed_at) VALUES (?,?,?,?,?,?,?,?,?,?)');
  ins.run('snp_1', 'org_a', 'mch_1', 'mine', 'ready', 'manual', 'lyr_1', 10, '2026-01-01T00:00:01.000Z', '2026-01-01T00:00:02.000Z');
  ins.run('snp_2', 'org_a', 'mch_1', 'Before restore', 'ready', 'restore', 'lyr_2', 20, '2026-01-01T00:00:03.000Z', '2026-01-01T00:00:04.000Z');
  ins.run('snp_3', 'org_a', 'mch_1', 'Stopped by billing', 'error', 'stop', null, null, '2026-01-01T00:00:05.000Z', '2026-01-01T00:00:06.000Z');
  ins.run('snp_4', 'org_a', 'mch_2', 'Before restore', 'pending', 'restore', null, null, '2026-01-01T00:00:07.000Z', null);
  ins.run('snp_5', 'org_a', 'mch_2', 'tpl', 'ready', 'template', 'lyr_5', 50, '2026-01-01T00:00:08.000Z', '2026-01-01T00:00:09.000Z');
  old.close();

  const db = openDb(file);
  t.teardown(() => db.close());
  t.equal((await schemaVersion(db)), 13, 'migrated to the latest version');
  t.same((await db.q().selectFrom('snapshots').select(['id', 'org_id', 'machine_id', 'name', 'state', 'origin', 'layer_id', 'size_bytes', 'created_at', 'completed_at']).orderBy('id').execute()), [
    { id: 'snp_1', org_id: 'org_a', machine_id: 'mch_1', name: 'mine', state: 'ready', origin: 'manual', layer_id: 'lyr_1', size_bytes: 10, created_at: '2026-01-01T00:00:01.000Z', completed_at: '2026-01-01T00:00:02.000Z' },
    { id: 'snp_2', org_id: 'org_a', machine_id: 'mch_1', name: 'Before restore', state: 'ready', origin: 'stop', layer_id: 'lyr_2', size_bytes: 20, created_at: '2026-01-01T00:00:03.000Z', completed_at: '2026-01-01T00:00:04.000Z' },
    { id: 'snp_3', org_id: 'org_a', machine_id: 'mch_1', name: 'Stopped by billing', state: 'error', origin: 'stop', layer_id: null, size_bytes: null, created_at: '2026-01-01T00:00:05.000Z', completed_at: '2026-01-01T00:00:06.000Z' },
    { id: 'snp_4', org_id: 'org_a', machine_id: 'mch_2', name: 'Before restore', state: 'pending', origin: 'stop', layer_id: null, size_bytes: null, created_at: '2026-01-01T00:00:07.000Z', completed_at: null },
    { id: 'snp_5', org_id: 'org_a', machine_id: 'mch_2', name: 'tpl', state: 'ready', origin: 'template', layer_id: 'lyr_5', size_bytes: 50, created_at: '2026-01-01T00:00:08.000Z', completed_at: '2026-01-01T00:00:09.000Z' },
  ]);
  t.same((await db.q().selectFrom('snapshots').select(['id', 'host_id']).orderBy('id').execute()), ['snp_1', 'snp_2', 'snp_3', 'snp_4', 'snp_5'].map((id) => ({ id, host_id: null })), 'version 13: captured before hosts, on the only host');
  t.same((await sqlite<{ name: string; notnull: number }>(db, "SELECT name, \"notnull\" FROM pragma_table_info('templates') WHERE name = 'host_id'")), [{ name: 'host_id', notnull: 0 }], 'templates record their host too');
  // Hand-written SQL: the origin is no value the schema's type allows, and the catalog and PRAGMAs are SQLite's own.
  await t.rejects(sqlite(db, "INSERT INTO snapshots (id,org_id,machine_id,name,state,origin,created_at) VALUES ('snp_6','org_a','mch_1','x','ready','restore','x')"), 'origin restore is no longer stored');
  t.same((await sqlite<{ name: string }>(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'snapshots' AND sql IS NOT NULL ORDER BY name")).map((r) => r.name), ['snapshots_machine', 'snapshots_org']);
  t.same((await sqlite(db, 'PRAGMA foreign_key_check')), [], 'no dangling reference');
});

t.test('database: pragmas, migrations, acknowledged writes survive a reopen', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-db-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'x.sqlite');
  const db = openDb(file);
  t.equal((await sqlite<{ journal_mode: string }>(db, 'PRAGMA journal_mode'))[0]!.journal_mode, 'wal');
  t.equal((await sqlite<{ synchronous: number }>(db, 'PRAGMA synchronous'))[0]!.synchronous, 2, 'synchronous = FULL');
  t.equal((await sqlite<{ foreign_keys: number }>(db, 'PRAGMA foreign_keys'))[0]!.foreign_keys, 1);
  t.equal((await sqlite<{ timeout: number }>(db, 'PRAGMA busy_timeout'))[0]!.timeout, 5000);
  t.equal((await schemaVersion(db)), MIGRATIONS[MIGRATIONS.length - 1]!.version);
  t.same(MIGRATIONS.map((m) => m.version), MIGRATIONS.map((_, i) => i + 1), 'versions are 1..n in order');
  await t.rejects(db.q().insertInto('memberships').values({ id: 'm', org_id: 'nope', user_id: 'nope', role: 'owner', created_at: 'x' }).execute(), 'foreign keys enforced');
  await t.rejects(db.tx(async () => {
    await db.q().insertInto('organizations').values({ id: 'o1', name: 'n', personal: 0, created_at: 'x' }).execute();
    throw new Error('roll back');
  }));
  t.equal((await db.q().selectFrom('organizations').selectAll().where('id', '=', 'o1').executeTakeFirst()), undefined, 'a failed transaction leaves nothing');
  await db.close();
  const again = openDb(file);
  t.equal((await schemaVersion(again)), MIGRATIONS.length, 'reopening does not re-run migrations');
  await again.close();

  // Through the app: a signup acknowledged with 201 is there after the database is closed and reopened.
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const u = await rig.user('durable');
  const reopened = openDb(rig.store.db.path);
  t.equal((await reopened.q().selectFrom('users').select('email').where('id', '=', u.userId).executeTakeFirst())?.email, u.email);
  await reopened.close();
});

t.test('passwords: scrypt at the default cost, constant-time verify', async (t) => {
  const h = await hashPassword('correct horse battery');
  t.match(h, new RegExp(`^scrypt\\$${DEFAULT_SCRYPT_COST.N}\\$8\\$1\\$`));
  t.ok(DEFAULT_SCRYPT_COST.N >= 2 ** 15);
  t.equal(await verifyPassword('correct horse battery', h), true);
  t.equal(await verifyPassword('correct horse batterz', h), false);
  t.not(await hashPassword('correct horse battery'), h, 'salted');
  t.equal(await verifyPassword('x', 'plaintext'), false, 'unknown format never verifies');
  t.same(readSessionCookie('a=1; computer_session=abc; b=2', false), { kind: 'one', token: 'abc' });
  t.same(readSessionCookie('computer_sessionx=abc', false), { kind: 'none' });
  t.same(readSessionCookie('computer_session=a; x=1; computer_session=b', false), { kind: 'many' }, 'two session cookies: neither');
  t.same(readSessionCookie('computer_session=a; __Host-computer_session=b', true), { kind: 'one', token: 'b' }, 'under https only the __Host- cookie counts');
  t.same(readSessionCookie('computer_session=a', true), { kind: 'none' });
});

t.test('config: parsed once from an env object, defaults, refusals', async (t) => {
  const c = parseConfig({});
  t.equal(c.port, 8080);
  t.equal(c.host, '127.0.0.1');
  t.equal(c.dataDir, './data');
  t.equal(c.publicBaseUrl, 'http://127.0.0.1:8080');
  t.equal(c.billingProvider, 'builtin');
  t.equal(c.trustProxy, false);
  t.equal(c.machineNetwork, 'outbound');
  t.same(c.vmNetwork, {});
  const n = parseConfig({ MACHINE_NETWORK: 'none', VM_BRIDGE: 'br-lab', VM_SUBNET: '10.50.0.0/24', VM_DNS: '9.9.9.9, 1.1.1.1' });
  t.equal(n.machineNetwork, 'none');
  t.same(n.vmNetwork, { bridge: 'br-lab', subnet: '10.50.0.0/24', dns: ['9.9.9.9', '1.1.1.1'] });
  t.throws(() => parseConfig({ MACHINE_NETWORK: 'inbound' }), { details: [{ field: 'MACHINE_NETWORK' }] } as object as Error);
  t.throws(() => parseConfig({ VM_DNS: 'dns.example' }), { details: [{ field: 'VM_DNS' }] } as object as Error);
  t.throws(() => parseConfig({ VM_BRIDGE: 'a-bridge-name-too-long' }), { details: [{ field: 'VM_BRIDGE' }] } as object as Error);
  const d = parseConfig({ PORT: '9000', PUBLIC_BASE_URL: 'https://computer.example/', ALLOWED_ORIGINS: 'https://a.example/path, http://b.example:81', TRUST_PROXY: 'true' });
  t.equal(d.publicBaseUrl, 'https://computer.example');
  t.same(d.allowedOrigins, ['https://a.example', 'http://b.example:81']);
  t.equal(isRecognisedOrigin(d, 'https://computer.example'), true);
  t.equal(isRecognisedOrigin(d, 'https://a.example'), true);
  t.equal(isRecognisedOrigin(d, 'https://computer.example.evil'), false);
  t.equal(isRecognisedOrigin(d, undefined), false);
  t.equal(d.trustProxy, true);
  t.throws(() => parseConfig({ PORT: 'eighty' }), { code: 'invalid_request', details: [{ field: 'PORT' }] } as object as Error);
  t.throws(() => parseConfig({ BILLING_PROVIDER: 'paypal' }), { details: [{ field: 'BILLING_PROVIDER' }] } as object as Error);
  // Stripe is a provider now: choosing it without its settings names each missing one.
  t.throws(() => parseConfig({ BILLING_PROVIDER: 'stripe' }), {
    details: [{ field: 'STRIPE_SECRET_KEY' }, { field: 'STRIPE_WEBHOOK_SECRET' }, { field: 'STRIPE_PRICES' }],
  } as object as Error);
  t.throws(() => parseConfig({ ALLOWED_ORIGINS: 'not a url' }));
});

t.test('domain: billing transitions, catalog dating, rate windows', async (t) => {
  // Every (event, state) pair, against the intended table.
  const expected: Record<string, Record<string, string | null>> = {
    'checkout.completed': { unsubscribed: 'trialing', trialing: null, active: null, past_due: null, canceled: 'active' },
    'trial.converted': { unsubscribed: null, trialing: 'active', active: null, past_due: null, canceled: null },
    'trial.payment_failed': { unsubscribed: null, trialing: 'past_due', active: null, past_due: null, canceled: null },
    'payment.failed': { unsubscribed: null, trialing: null, active: 'past_due', past_due: null, canceled: null },
    'payment.succeeded': { unsubscribed: null, trialing: null, active: null, past_due: 'active', canceled: null },
    'subscription.canceled': { unsubscribed: null, trialing: 'canceled', active: 'canceled', past_due: 'canceled', canceled: null },
  };
  t.same(Object.keys(BILLING_TRANSITIONS).sort(), [...PROVIDER_EVENTS].sort());
  for (const ev of PROVIDER_EVENTS) {
    for (const st of ['unsubscribed', 'trialing', 'active', 'past_due', 'canceled'] as const) {
      t.equal(nextBillingState(st, ev), expected[ev]![st], `${ev} from ${st}`);
    }
  }
  // Nothing ever moves an account back to unsubscribed: that state is only the initial one.
  for (const ev of PROVIDER_EVENTS) t.notOk(Object.values(BILLING_TRANSITIONS[ev]).includes('unsubscribed'));

  const v2: CatalogVersion = { ...CATALOG[0]!, version: 'future', effective_from: '2027-01-01T00:00:00.000Z' };
  const cat = [...CATALOG, v2];
  t.equal(catalogAt(new Date('2026-12-31T23:59:59Z'), cat).version, CATALOG[0]!.version);
  t.equal(catalogAt(new Date('2027-01-01T00:00:00Z'), cat).version, 'future');
  t.equal(catalogAt(new Date('2020-01-01T00:00:00Z'), cat).version, CATALOG[0]!.version);

  const rule = { kind: 'window' as const, name: 'signup_ip' as const, max: 2, window_ms: 1000 };
  let w = rateAfterHit(rule, undefined, 0);
  t.same(rateDecision(rule, w, 10), { allowed: true });
  w = rateAfterHit(rule, w, 10);
  t.same(rateDecision(rule, w, 10), { allowed: false, retry_after_s: 1 });
  t.same(rateDecision(rule, w, 1000), { allowed: true }, 'window ends');
  t.same(rateAfterHit(rule, w, 1000), { window_start_ms: 1000, count: 1 });

  // Backoff: 2 free failures, then 1 s, 2 s, 4 s… capped at 10 s, forgotten 60 s after the last one.
  const b: BackoffRule = { kind: 'backoff', name: 'login_failure_email_ip', free: 2, base_ms: 1000, max_ms: 10_000, forget_ms: 60_000 };
  t.same([0, 1, 2, 3, 4, 5, 6, 30].map((n) => backoffWait(b, n)), [0, 0, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  let s = rateAfterHit(b, undefined, 0);
  s = rateAfterHit(b, s, 100);
  t.same(s, { window_start_ms: 100, count: 2 }, 'the last failure time and the run length');
  t.same(rateDecision(b, s, 100), { allowed: false, retry_after_s: 1 });
  t.same(rateDecision(b, s, 1100), { allowed: true }, 'the wait is over');
  s = rateAfterHit(b, s, 1100);
  t.same(rateDecision(b, s, 1100), { allowed: false, retry_after_s: 2 });
  t.same(rateDecision(b, s, 2600), { allowed: false, retry_after_s: 1 });
  t.same(rateAfterHit(b, s, 61_100), { window_start_ms: 61_100, count: 1 }, 'forgotten after forget_ms');
  t.same(rateDecision(b, { window_start_ms: 0, count: 99 }, 60_000), { allowed: true }, 'forgotten: allowed again');
});

t.test('import boundaries', async (t) => {
  const walk = (dir: string): string[] =>
    fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [])) : [];
  const importsOf = (f: string) => [...fs.readFileSync(f, 'utf8').matchAll(/(?:import|export)[^'"]*from\s+'([^']+)'/g)].map((m) => m[1]!);
  const domain = walk(path.join(ROOT, 'control-plane/src/domain'));
  t.ok(domain.length >= 5);
  for (const f of domain) {
    for (const spec of importsOf(f)) {
      const resolved = spec.startsWith('.') ? path.resolve(path.dirname(f), spec) : spec;
      const ok = resolved.startsWith(path.join(ROOT, 'shared') + path.sep) || resolved.startsWith(path.join(ROOT, 'control-plane/src/domain') + path.sep);
      t.ok(ok, `${path.relative(ROOT, f)} imports only shared/ and domain/ (${spec})`);
    }
  }
  const all = [...walk(path.join(ROOT, 'control-plane/src')), ...walk(path.join(ROOT, 'agent/src')), ...walk(path.join(ROOT, 'shared'))];
  const sqlite = all.filter((f) => importsOf(f).includes('better-sqlite3')).map((f) => path.relative(ROOT, f));
  t.same(sqlite, ['control-plane/src/store/db.ts'], 'one module imports better-sqlite3');
  const cp = path.join(ROOT, 'control-plane/src');
  const resolvedImports = (f: string) => importsOf(f).filter((s) => s.startsWith('.')).map((s) => path.resolve(path.dirname(f), s));
  const under = (p: string, dir: string) => p.startsWith(path.join(cp, dir) + path.sep);
  const agentClient = walk(cp)
    .filter((f) => !under(f, 'agent-client') && resolvedImports(f).some((r) => under(r, 'agent-client')))
    .map((f) => path.relative(ROOT, f));
  t.same(agentClient, ['control-plane/src/services/machine-agent/client.ts'], 'one module imports the agent client: the machine-agent service');
  // Layers: services never reach up into a door (the HTTP routes, the gateway, previews, the tool endpoints, MCP).
  for (const f of walk(path.join(cp, 'services'))) {
    const up = resolvedImports(f).filter((r) => ['api', 'gateway', 'previews', 'computer-tools', 'mcp'].some((d) => under(r, d)));
    t.same(up.map((r) => path.relative(ROOT, r)), [], `${path.relative(ROOT, f)} imports no door`);
  }
  const mine = ['api', 'auth', 'billing', 'domain', 'services', 'store'].flatMap((d) => walk(path.join(ROOT, 'control-plane/src', d)));
  for (const f of [...mine, ...['app.ts', 'config.ts', 'context.ts', 'log.ts'].map((f) => path.join(ROOT, 'control-plane/src', f))]) {
    t.notOk(/process\.env/.test(fs.readFileSync(f, 'utf8')), `${path.relative(ROOT, f)} does not read the environment`);
  }
});

/**
 * One schema, two engines (issue 24 item 1): the migrations written with Kysely's schema builder
 * (store/engine/migrations.ts) build, on SQLite, exactly the schema the hand-written SQL of versions 1..10 built
 * (legacy-migrations.ts, frozen as shipped); a data dir left at any of versions 1..10 migrates forward in place,
 * its rows intact; the same migrations on a real throwaway PostgreSQL give the same tables and columns.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import t, { type Test } from 'tap';
import { openDb, schemaVersion } from '../../../control-plane/src/store/db.js';
import { createStore } from '../../../control-plane/src/store/store.js';
import { LATEST_VERSION } from '../../../control-plane/src/store/engine/migrations.js';
import { openEngine } from '../../../control-plane/src/store/engine/open.js';
import { migratePostgres, openPostgres, PG_TYPES, postgresSchemaVersion } from '../../../control-plane/src/store/engine/postgres.js';
import { startPostgres } from '../../helpers/postgres.js';
import { LEGACY_MIGRATIONS } from './legacy-migrations.js';

const ALL_TABLES = [
  'api_keys', 'auth_sessions', 'billing_accounts', 'billing_events', 'billing_links', 'cluster_keys', 'entitlement_overrides', 'hosts', 'input_leases',
  'invitations', 'machine_events', 'machine_secrets', 'machines', 'memberships', 'meter_cursors', 'organizations', 'previews',
  'rate_limits', 'sessions', 'snapshots', 'stripe_customers', 'stripe_meter_reports', 'stripe_webhook_events', 'templates',
  'usage_records', 'usage_summaries', 'users', 'volume_restarts',
];

function tmpFile(t: Test, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-foundation-schema-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, name);
}

/** Lowercase, unquoted, one space between words and none inside parentheses or after commas. */
function norm(text: string): string {
  return text.toLowerCase().replace(/"/g, '').replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').replace(/ ?, ?/g, ',').trim();
}

/** Every `CHECK (…)` of a CREATE TABLE, normalized. */
function checks(createSql: string): string[] {
  const out: string[] = [];
  const re = /\bcheck\s*\(/gi;
  for (let m = re.exec(createSql); m; m = re.exec(createSql)) {
    let depth = 1;
    let i = m.index + m[0].length;
    for (; i < createSql.length && depth > 0; i++) depth += createSql[i] === '(' ? 1 : createSql[i] === ')' ? -1 : 0;
    out.push(norm(createSql.slice(m.index + m[0].length, i - 1)));
  }
  return out.sort();
}

/** The whole schema of a SQLite file as SQLite itself reports it: columns, keys, indexes, checks. */
function describeSqlite(file: string) {
  const db = new Database(file, { readonly: true });
  try {
    const tables = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string; sql: string }>;
    return Object.fromEntries(
      tables.map(({ name, sql: createSql }) => {
        const columns = (db.pragma(`table_xinfo("${name}")`) as Array<{ name: string; type: string; notnull: number; dflt_value: string | null; pk: number }>).map((c) => ({
          name: c.name, type: c.type.toUpperCase(), notnull: c.notnull, dflt_value: c.dflt_value, pk: c.pk,
        }));
        const indexes = (db.pragma(`index_list("${name}")`) as Array<{ name: string; unique: number; origin: string; partial: number }>)
          .map((ix) => {
            const ixSql = (db.prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?").get(ix.name) as { sql: string | null } | undefined)?.sql ?? null;
            return {
              name: ix.name, unique: ix.unique, origin: ix.origin, partial: ix.partial,
              columns: (db.pragma(`index_info("${ix.name}")`) as Array<{ name: string }>).map((c) => c.name),
              where: ixSql && /\bwhere\b/i.test(ixSql) ? norm(ixSql.slice(ixSql.search(/\bwhere\b/i))) : null,
            };
          })
          .sort((a, b) => a.name.localeCompare(b.name));
        const foreignKeys = (db.pragma(`foreign_key_list("${name}")`) as Array<{ table: string; from: string; to: string; on_update: string; on_delete: string }>)
          .map((f) => ({ table: f.table, from: f.from, to: f.to, on_update: f.on_update, on_delete: f.on_delete }))
          .sort((a, b) => a.from.localeCompare(b.from));
        return [name, { columns, indexes, foreignKeys, checks: checks(createSql), autoincrement: /\bautoincrement\b/i.test(createSql) }];
      }),
    );
  } finally {
    db.close();
  }
}

/** A SQLite file as a release before the engines left it: the legacy SQL up to `version`, optionally with rows. */
function legacyFile(file: string, version: number, rows?: (db: Database.Database) => void): void {
  const db = new Database(file);
  db.pragma('foreign_keys = ON');
  for (const m of LEGACY_MIGRATIONS.filter((m) => m.version <= version)) {
    db.exec(m.sql);
    db.pragma(`user_version = ${m.version}`);
  }
  rows?.(db);
  db.close();
}

t.test('a fresh SQLite built by the engine migrations has exactly the schema the shipped SQL built', async (t) => {
  const legacy = tmpFile(t, 'legacy.sqlite');
  legacyFile(legacy, 10);
  // Versions 11 on (no legacy SQL: written with the engines) applied to the shipped version 10.
  await openDb(legacy).close();
  const fresh = tmpFile(t, 'fresh.sqlite');
  await openDb(fresh).close();
  const want = describeSqlite(legacy);
  const got = describeSqlite(fresh);
  t.same(Object.keys(got), ALL_TABLES);
  t.same(got, want, 'columns, types, defaults, keys, indexes (partial ones with their WHERE), foreign keys and CHECKs');

  // Pinned literally for a few tables, so that a change to both builds is still seen.
  t.same(got.machine_events!.columns.map((c) => [c.name, c.type, c.notnull, c.pk]), [
    ['seq', 'INTEGER', 0, 1], ['id', 'TEXT', 1, 0], ['org_id', 'TEXT', 1, 0], ['machine_id', 'TEXT', 1, 0],
    ['type', 'TEXT', 1, 0], ['data', 'TEXT', 1, 0], ['created_at', 'TEXT', 1, 0],
  ]);
  t.equal(got.machine_events!.autoincrement, true, 'event seqs are never reused');
  t.same(got.machine_secrets!.columns.map((c) => `${c.name} ${c.type}`), [
    'id TEXT', 'org_id TEXT', 'machine_id TEXT', 'name TEXT', 'version INTEGER', 'key_id TEXT', 'sealed BLOB', 'value_bytes INTEGER',
    'created_at TEXT', 'updated_at TEXT', 'delivered_at TEXT', 'delivered_version INTEGER', 'delivered_boot TEXT',
  ]);
  t.same(got.machine_secrets!.checks, ['version >= 1']);
  t.same(got.snapshots!.checks, ["origin in ('manual','stop','template')", "state in ('pending','ready','error','deleting')"]);
  t.same(got.usage_summaries!.columns.map((c) => [c.name, c.pk]), [['org_id', 1], ['period_start', 2], ['body', 0], ['created_at', 0]]);
  t.same(got.organizations!.columns.find((c) => c.name === 'personal'), { name: 'personal', type: 'INTEGER', notnull: 1, dflt_value: '0', pk: 0 });
  t.same(got.machines!.indexes.find((i) => i.name === 'machines_org_name'), {
    name: 'machines_org_name', unique: 1, origin: 'c', partial: 1, columns: ['org_id', 'name'], where: 'where deleted_at is null',
  });
  t.same(got.sessions!.columns.map((c) => c.name).slice(-1), ['last_active_at']);
  // Version 11: hosts, machines.host_id, cluster_keys.
  t.same(got.hosts!.columns.map((c) => [c.name, c.type, c.notnull, c.dflt_value, c.pk]), [
    ['id', 'TEXT', 0, null, 1], ['region', 'TEXT', 1, "'default'", 0], ['state', 'TEXT', 1, null, 0], ['epoch', 'INTEGER', 1, '0', 0],
    ['internal_url', 'TEXT', 0, null, 0], ['capacity', 'TEXT', 1, null, 0], ['heartbeat_at', 'TEXT', 0, null, 0],
    ['created_at', 'TEXT', 1, null, 0], ['updated_at', 'TEXT', 1, null, 0],
  ]);
  t.same(got.hosts!.checks, ["state in ('active','cordoned','draining','down')"]);
  t.same(got.machines!.columns.at(-1), { name: 'host_id', type: 'TEXT', notnull: 0, dflt_value: null, pk: 0 });
  t.same(got.machines!.foreignKeys.find((f) => f.from === 'host_id'), { table: 'hosts', from: 'host_id', to: 'id', on_update: 'NO ACTION', on_delete: 'NO ACTION' });
  t.same(got.machines!.indexes.find((i) => i.name === 'machines_host'), { name: 'machines_host', unique: 0, origin: 'c', partial: 0, columns: ['host_id', 'state'], where: null });
  t.same(got.cluster_keys!.columns.map((c) => `${c.name} ${c.type} ${c.notnull || c.pk}`), ['name TEXT 1', 'key BLOB 1', 'created_at TEXT 1']);
  // Version 12: billing events keyed by their recording sequence, the id still unique.
  t.same(got.billing_events!.columns.map((c) => [c.name, c.type, c.notnull, c.pk]), [
    ['id', 'TEXT', 1, 0], ['org_id', 'TEXT', 1, 0], ['type', 'TEXT', 1, 0], ['from_state', 'TEXT', 1, 0], ['to_state', 'TEXT', 1, 0],
    ['created_at', 'TEXT', 1, 0], ['seq', 'INTEGER', 0, 1],
  ]);
  t.equal(got.billing_events!.autoincrement, true, 'billing event seqs are never reused');
  t.same(got.billing_events!.indexes.map((i) => [i.unique, i.columns]), [[1, ['id']]]);
});

t.test('version 12 numbers the billing events a SQLite file holds in the order they read in (its rowid)', async (t) => {
  const file = tmpFile(t, 'control-plane.sqlite');
  legacyFile(file, 10, (db) => {
    db.exec("INSERT INTO organizations (id,name,personal,created_at) VALUES ('org_1','a',1,'2026-01-01T00:00:00.000Z')");
    const ev = db.prepare("INSERT INTO billing_events (id,org_id,type,from_state,to_state,created_at) VALUES (?,'org_1','t',?,?,?)");
    // Two of one instant recorded with ids in the reverse of their order, and one older recorded last.
    ev.run('bev_z', 'unsubscribed', 'trialing', '2026-01-01T00:00:01.000Z');
    ev.run('bev_a', 'trialing', 'active', '2026-01-01T00:00:01.000Z');
    ev.run('bev_m', 'x', 'y', '2026-01-01T00:00:00.500Z');
  });
  const db = openDb(file);
  t.teardown(() => db.close());
  t.same(await db.q().selectFrom('billing_events').select(['seq', 'id']).orderBy('seq').execute(), [
    { seq: 1, id: 'bev_z' }, { seq: 2, id: 'bev_a' }, { seq: 3, id: 'bev_m' },
  ]);
  const next = await db.q().insertInto('billing_events')
    .values({ id: 'bev_0', org_id: 'org_1', type: 't', from_state: 'active', to_state: 'past_due', created_at: '2026-01-01T00:00:01.000Z' })
    .returning('seq').executeTakeFirstOrThrow();
  t.equal(next.seq, 4, 'the next event is numbered after them');
  t.same((await createStore(db).billing.events('org_1')).map((e) => `${e.from_state}>${e.to_state}`), [
    'x>y', 'unsubscribed>trialing', 'trialing>active', 'active>past_due',
  ]);
});

t.test('a data dir left at any version 1..10 migrates forward in place to the same schema', async (t) => {
  const full = tmpFile(t, 'full.sqlite');
  legacyFile(full, 10);
  await openDb(full).close();
  const want = describeSqlite(full);
  for (let v = 1; v <= 10; v++) {
    const file = tmpFile(t, `v${v}.sqlite`);
    legacyFile(file, v);
    const db = openDb(file);
    t.equal(await schemaVersion(db), LATEST_VERSION, `from version ${v}`);
    await db.close();
    t.same(describeSqlite(file), want, `from version ${v}: the schema a fresh build has`);
  }
});

t.test('an existing version-10 SQLite file with rows survives the new runner and reads through Kysely', async (t) => {
  const file = tmpFile(t, 'control-plane.sqlite');
  legacyFile(file, 10, (db) => {
    db.exec("INSERT INTO users (id,email,name,password_hash,personal_org_id,created_at) VALUES ('usr_1','a@example.com','A','h','org_1','2026-01-01T00:00:00.000Z')");
    db.exec("INSERT INTO organizations (id,name,personal,created_at) VALUES ('org_1','a',1,'2026-01-01T00:00:00.000Z')");
    db.exec(`INSERT INTO machines (id,org_id,name,size,template,region,metadata,state,agent_token,created_by_kind,created_by_id,created_at,updated_at,state_changed_at)
             VALUES ('mch_1','org_1','box','small',NULL,NULL,'{}','running','tok','user','usr_1','2026-01-01T00:00:01.000Z','2026-01-01T00:00:01.000Z','2026-01-01T00:00:01.000Z')`);
    const ev = db.prepare("INSERT INTO machine_events (id,org_id,machine_id,type,data,created_at) VALUES (?,'org_1','mch_1','machine.state','{}','2026-01-01T00:00:02.000Z')");
    ev.run('evt_1');
    ev.run('evt_2');
    db.prepare("INSERT INTO machine_secrets (id,org_id,machine_id,name,version,key_id,sealed,value_bytes,created_at,updated_at) VALUES ('sec_1','org_1','mch_1','K',1,'k1',?,3,'x','x')")
      .run(Buffer.from([0, 1, 255]));
  });
  const kdb = (await openEngine({ dataDir: path.dirname(file) })).db;
  t.teardown(() => kdb.destroy());
  t.same(await kdb.selectFrom('organizations').selectAll().execute(), [{ id: 'org_1', name: 'a', personal: 1, created_at: '2026-01-01T00:00:00.000Z' }]);
  t.same(await kdb.selectFrom('machine_events').select(['seq', 'id']).orderBy('seq').execute(), [{ seq: 1, id: 'evt_1' }, { seq: 2, id: 'evt_2' }]);
  t.same((await kdb.selectFrom('machine_secrets').select('sealed').executeTakeFirstOrThrow()).sealed, Buffer.from([0, 1, 255]));
  const inserted = await kdb
    .insertInto('machine_events')
    .values({ id: 'evt_3', org_id: 'org_1', machine_id: 'mch_1', type: 'machine.state', data: '{}', created_at: '2026-01-01T00:00:03.000Z' })
    .returning('seq')
    .executeTakeFirstOrThrow();
  t.equal(inserted.seq, 3);
  t.same(await kdb.selectFrom('machines').select(['id', 'host_id']).execute(), [{ id: 'mch_1', host_id: null }], 'recorded before hosts existed: no host yet');
  const fresh = tmpFile(t, 'fresh.sqlite');
  await openDb(fresh).close();
  t.same(describeSqlite(file), describeSqlite(fresh), 'migrated forward to the schema a fresh build has');
  const db = openDb(file);
  t.equal(await schemaVersion(db), LATEST_VERSION);
  await db.close();
});

t.test('the same migrations on a real PostgreSQL: the same tables and columns, the version recorded', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const engine = await openPostgres(server.url);
  t.equal(await postgresSchemaVersion(engine.pool), LATEST_VERSION);
  t.same((await engine.pool.query('SELECT version, name FROM schema_migrations ORDER BY version')).rows.map((r: { version: number }) => r.version), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);

  const cols = (await engine.pool.query<{ table_name: string; column_name: string; data_type: string; is_nullable: string; is_identity: string }>(
    `SELECT table_name, column_name, data_type, is_nullable, is_identity FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY table_name, ordinal_position`,
  )).rows;
  const sqliteFile = tmpFile(t, 'fresh.sqlite');
  await openDb(sqliteFile).close();
  const lite = describeSqlite(sqliteFile);
  const byTable = (rows: Array<{ table_name: string; column_name: string }>) => {
    const out: Record<string, string[]> = {};
    for (const r of rows) (out[r.table_name] ??= []).push(r.column_name);
    return out;
  };
  t.same(byTable(cols), Object.fromEntries(Object.entries(lite).map(([name, d]) => [name, d.columns.map((c) => c.name)])), 'every table, every column, in order');
  // Nullability matches SQLite's NOT NULL everywhere (a PRIMARY KEY column is NOT NULL on PostgreSQL).
  const liteNotNull = Object.entries(lite).flatMap(([name, d]) => d.columns.filter((c) => c.notnull || c.pk).map((c) => `${name}.${c.name}`)).sort();
  t.same(cols.filter((c) => c.is_nullable === 'NO').map((c) => `${c.table_name}.${c.column_name}`).sort(), liteNotNull);
  t.same(cols.filter((c) => c.table_name === 'machine_events').map((c) => [c.column_name, c.data_type, c.is_identity]), [
    ['seq', 'bigint', 'YES'], ['id', 'text', 'NO'], ['org_id', 'text', 'NO'], ['machine_id', 'text', 'NO'],
    ['type', 'text', 'NO'], ['data', 'text', 'NO'], ['created_at', 'text', 'NO'],
  ]);
  t.same(cols.filter((c) => c.table_name === 'machine_secrets' && ['sealed', 'version', 'key_id'].includes(c.column_name)).map((c) => [c.column_name, c.data_type]), [
    ['version', 'bigint'], ['key_id', 'text'], ['sealed', 'bytea'],
  ]);
  const pgIndexes = (await engine.pool.query<{ indexname: string }>(
    `SELECT indexname FROM pg_indexes i WHERE schemaname = 'public'
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.indexname))::regclass) ORDER BY indexname`,
  )).rows.map((r) => r.indexname);
  const liteIndexes = Object.values(lite).flatMap((d) => d.indexes.filter((i) => i.origin === 'c').map((i) => i.name)).sort();
  t.same(pgIndexes, liteIndexes, 'the same named indexes');

  // Rows read as they do on SQLite: 64-bit integers as numbers, bytea as a Buffer, the seq from the identity.
  const db = engine.db;
  await db.insertInto('organizations').values({ id: 'org_1', name: 'a', personal: 1, created_at: 'x' }).execute();
  await db.insertInto('machines').values({
    id: 'mch_1', org_id: 'org_1', name: 'box', size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'tok',
    created_by_kind: 'user', created_by_id: 'usr_1', created_at: 'x', updated_at: 'x', state_changed_at: 'x', deleted_at: null,
  }).execute();
  const ev = await db.insertInto('machine_events').values({ id: 'evt_1', org_id: 'org_1', machine_id: 'mch_1', type: 't', data: '{}', created_at: 'x' }).returning('seq').executeTakeFirstOrThrow();
  t.equal(ev.seq, 1);
  await db.insertInto('machine_secrets').values({
    id: 'sec_1', org_id: 'org_1', machine_id: 'mch_1', name: 'K', version: 1, key_id: 'k', sealed: Buffer.from([0, 1, 255]), value_bytes: 3,
    created_at: 'x', updated_at: 'x', delivered_at: null, delivered_version: null, delivered_boot: null,
  }).execute();
  t.same(await db.selectFrom('machine_secrets').select(['sealed', 'version']).executeTakeFirstOrThrow(), { sealed: Buffer.from([0, 1, 255]), version: 1 });
  t.same((await sql<{ n: number; s: number }>`SELECT count(*) AS n, sum(personal) AS s FROM organizations`.execute(db)).rows, [{ n: 1, s: 1 }]);
  await t.rejects(
    db.insertInto('snapshots').values({ id: 's', org_id: 'org_1', machine_id: 'm', name: 'n', state: 'ready', origin: sql<'stop'>`'restore'`, layer_id: null, size_bytes: null, created_at: 'x', completed_at: null }).execute(),
    { message: /snapshots_origin_check/ },
    'the CHECKs hold on PostgreSQL too',
  );
  await t.rejects(
    db.insertInto('machines').values({
      id: 'mch_2', org_id: 'org_1', name: 'box', size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'tok',
      created_by_kind: 'user', created_by_id: 'usr_1', created_at: 'x', updated_at: 'x', state_changed_at: 'x', deleted_at: null,
    }).execute(),
    { message: /machines_org_name/ },
    'the partial unique index holds',
  );
  await engine.close();
});

t.test('PostgreSQL: version 10 migrates stored "restore" origins, and concurrent openers migrate once', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const pool = new pg.Pool({ connectionString: server.url, types: PG_TYPES, max: 2 });
  t.equal(await migratePostgres(pool, 9), 9);
  await pool.query("INSERT INTO organizations (id,name,personal,created_at) VALUES ('org_1','a',0,'x')");
  await pool.query("INSERT INTO snapshots (id,org_id,machine_id,name,state,origin,created_at) VALUES ('s1','org_1','m','Before restore','ready','restore','x'), ('s2','org_1','m','n','ready','manual','x')");
  // Three control planes start at once on the half-migrated database.
  const engines = await Promise.all([1, 2, 3].map(() => openPostgres(server.url, { max: 2 })));
  t.same((await pool.query('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r: { version: number }) => r.version), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 'each version applied once');
  t.same((await pool.query('SELECT id, origin FROM snapshots ORDER BY id')).rows, [{ id: 's1', origin: 'stop' }, { id: 's2', origin: 'manual' }]);
  for (const e of engines) await e.close();
  await pool.end();
});

t.test('PostgreSQL: version 12 numbers the billing events held by (created_at, id), their order until then', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const pool = new pg.Pool({ connectionString: server.url, types: PG_TYPES, max: 2 });
  t.teardown(() => pool.end());
  t.equal(await migratePostgres(pool, 11), 11);
  await pool.query("INSERT INTO organizations (id,name,personal,created_at) VALUES ('org_1','a',0,'x')");
  await pool.query(`INSERT INTO billing_events (id,org_id,type,from_state,to_state,created_at) VALUES
    ('bev_z','org_1','t','a','b','2026-01-01T00:00:01.000Z'), ('bev_a','org_1','t','c','d','2026-01-01T00:00:01.000Z'),
    ('bev_m','org_1','t','e','f','2026-01-01T00:00:00.500Z'), ('bev_B','org_1','t','g','h','2026-01-01T00:00:01.000Z')`);
  t.equal(await migratePostgres(pool, 12), 12);
  t.same((await pool.query('SELECT seq, id FROM billing_events ORDER BY seq')).rows, [
    { seq: 1, id: 'bev_m' }, { seq: 2, id: 'bev_B' }, { seq: 3, id: 'bev_a' }, { seq: 4, id: 'bev_z' },
  ], 'ids in byte order within an instant (B before a)');
  const next = await pool.query("INSERT INTO billing_events (id,org_id,type,from_state,to_state,created_at) VALUES ('bev_0','org_1','t','i','j','x') RETURNING seq");
  t.same(next.rows, [{ seq: 5 }], 'the identity continues after them');
  await t.rejects(pool.query("INSERT INTO billing_events (id,org_id,type,from_state,to_state,created_at) VALUES ('bev_0','org_1','t','i','j','x')"), {
    message: /billing_events_id_key/,
  }, 'the id is still unique');
  const key = await pool.query(`SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
    WHERE i.indrelid = 'billing_events'::regclass AND i.indisprimary`);
  t.same(key.rows, [{ attname: 'seq' }]);
});

t.test('DATABASE_URL that is not a postgres URL is refused without repeating it', async (t) => {
  await t.rejects(openEngine({ databaseUrl: 'mysql://root:hunter2@db/x', dataDir: '/nonexistent' }), {
    message: 'DATABASE_URL must be a postgres:// or postgresql:// URL',
  });
});

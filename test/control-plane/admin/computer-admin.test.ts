/**
 * `computer-admin hosts` (control-plane/src/admin/) on a real, throwaway PostgreSQL and on a SQLite DATA_DIR: the
 * list (table and --json) pinned literally, cordon and uncordon through the state table, refusals with their exit
 * codes, and the executable entry reading DATABASE_URL without ever printing it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { runAdmin } from '../../../control-plane/src/admin/computer-admin.js';
import { formatAge } from '../../../control-plane/src/admin/hosts.js';
import { openDb, type Db } from '../../../control-plane/src/store/db.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { hostsRepo } from '../../../control-plane/src/store/repos/hosts.js';
import { startPostgres } from '../../helpers/postgres.js';

const run = promisify(execFile);
const ENTRY = path.resolve('control-plane/src/admin/computer-admin.ts');
const T0 = '2026-01-01T00:00:00.000Z';
/** The clock the ages are pinned to: 1.5 s after A's heartbeat, 3 days and 0.5 s after B's. */
const NOW = Date.parse('2026-01-04T00:00:01.500Z');
const GiB = 1024 ** 3;
const A = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';
const C = 'host_cccccccccccccccccccccccc';

async function admin(env: Record<string, string>, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdmin(argv, { env, out: (l) => out.push(l), err: (l) => err.push(l), now: () => NOW });
  return { code, out, err };
}

/** Three hosts in known states: A active with two machines (one deleted), B cordoned and silent, C never heartbeat. */
async function seed(db: Db): Promise<void> {
  const hosts = hostsRepo(db);
  await hosts.takeOver({ id: A, region: 'default', capacity: { cores: 2, memory_bytes: 24 * GiB, disk_bytes: 100 * GiB, machines: { small: 4, standard: 2, large: 1 } }, internalUrl: 'http://10.0.0.1:1' });
  await hosts.takeOver({ id: A, region: 'default', capacity: { cores: 2, memory_bytes: 24 * GiB, disk_bytes: 100 * GiB, machines: { small: 4, standard: 2, large: 1 } }, internalUrl: 'http://10.0.0.1:1' });
  await hosts.takeOver({ id: B, region: 'eu-west', capacity: { cores: 64, memory_bytes: 256 * GiB, disk_bytes: 1024 * GiB, machines: { small: 57, standard: 28, large: 14 } }, internalUrl: null });
  await hosts.operate(B, 'cordon');
  await db.q().insertInto('hosts').values({ id: C, state: 'active', internal_url: null, capacity: '{"cores":1,"memory_bytes":0,"disk_bytes":0,"machines":{}}', heartbeat_at: null, created_at: T0, updated_at: T0 }).execute();
  await db.q().updateTable('hosts').set({ heartbeat_at: '2026-01-04T00:00:00.000Z' }).where('id', '=', A).execute();
  await db.q().updateTable('hosts').set({ heartbeat_at: '2026-01-01T00:00:01.000Z' }).where('id', '=', B).execute();
  await db.q().insertInto('organizations').values({ id: 'org_1', name: 'o', personal: 0, created_at: T0 }).execute();
  for (const [id, deleted] of [['mch_1', null], ['mch_2', T0]] as const) {
    await db.q().insertInto('machines').values({
      id, org_id: 'org_1', name: id, size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'tok',
      created_by_kind: 'user', created_by_id: 'usr_1', created_at: T0, updated_at: T0, state_changed_at: T0, deleted_at: deleted, host_id: A,
    }).execute();
  }
}

const TABLE = [
  'ID                             REGION   STATE     EPOCH  MACHINES  CORES  MEMORY     DISK        HOLDS                          HEARTBEAT',
  'host_aaaaaaaaaaaaaaaaaaaaaaaa  default  active    2      1         2      24.0 GiB   100.0 GiB   small:4 standard:2 large:1     1.5 s ago',
  'host_bbbbbbbbbbbbbbbbbbbbbbbb  eu-west  cordoned  1      0         64     256.0 GiB  1024.0 GiB  small:57 standard:28 large:14  3 d ago',
  'host_cccccccccccccccccccccccc  default  active    0      0         1      0.0 GiB    0.0 GiB                                    never',
];

t.test('PostgreSQL: hosts list, --json, cordon, uncordon, refusals', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const env = { DATABASE_URL: server.url };
  const empty = await admin(env, 'hosts', 'list');
  t.same(empty, { code: 0, out: ['no hosts registered yet (a host registers when its control plane starts)'], err: [] });

  const db = await openStoreDb({ databaseUrl: server.url, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  await seed(db);

  t.same(await admin(env, 'hosts', 'list'), { code: 0, out: TABLE, err: [] });
  const json = await admin(env, 'hosts', 'list', '--json');
  t.equal(json.code, 0);
  t.same(JSON.parse(json.out.join('')), {
    hosts: [
      { id: A, region: 'default', state: 'active', epoch: 2, machines: 1, capacity: { cores: 2, memory_bytes: 25769803776, disk_bytes: 107374182400, machines: { small: 4, standard: 2, large: 1 } }, heartbeat_at: '2026-01-04T00:00:00.000Z', heartbeat_age_ms: 1500 },
      { id: B, region: 'eu-west', state: 'cordoned', epoch: 1, machines: 0, capacity: { cores: 64, memory_bytes: 274877906944, disk_bytes: 1099511627776, machines: { small: 57, standard: 28, large: 14 } }, heartbeat_at: '2026-01-01T00:00:01.000Z', heartbeat_age_ms: 259200500 },
      { id: C, region: 'default', state: 'active', epoch: 0, machines: 0, capacity: { cores: 1, memory_bytes: 0, disk_bytes: 0, machines: {} }, heartbeat_at: null, heartbeat_age_ms: null },
    ],
  });
  t.equal(json.out.length, 1, 'one line of JSON');

  t.same(await admin(env, 'hosts', 'cordon', A), { code: 0, out: [`${A}: cordoned (was active)`], err: [] });
  t.same(await admin(env, 'hosts', 'cordon', A), { code: 0, out: [`${A}: already cordoned`], err: [] });
  t.same(await admin(env, 'hosts', 'uncordon', A), { code: 0, out: [`${A}: active (was cordoned)`], err: [] });
  t.same(await admin(env, 'hosts', 'uncordon', A), { code: 0, out: [`${A}: already active`], err: [] });
  await db.q().updateTable('hosts').set({ state: 'down' }).where('id', '=', C).execute();
  t.same(await admin(env, 'hosts', 'uncordon', C), { code: 1, out: [], err: [`computer-admin: refused: ${C}: the host is down: it becomes active when its driver returns`] });
  t.same(await admin(env, 'hosts', 'cordon', 'host_dddddddddddddddddddddddd'), { code: 1, out: [], err: ['computer-admin: no host host_dddddddddddddddddddddddd'] });
  t.same(await admin(env, 'hosts', 'cordon', 'mch_aaaaaaaaaaaaaaaaaaaaaaaa'), { code: 2, out: [], err: ['computer-admin: HOST must be a host id (host_ and 20-32 of [0-9a-z]; `computer-admin hosts list` shows them)'] });
  t.same(await admin(env, 'hosts', 'drain', C), { code: 1, out: [], err: [`computer-admin: refused: ${C}: the host is down: its disks cannot be moved off it (drain it once its driver returns)`] });
  const usage = [
    'computer-admin: usage: computer-admin hosts list [--json]\n       computer-admin hosts cordon|uncordon HOST\n       computer-admin hosts drain HOST [--json]\nreads DATABASE_URL (PostgreSQL), else DATA_DIR (default ./data) for the SQLite deployment',
  ];
  for (const argv of [[], ['machines', 'list'], ['hosts'], ['hosts', 'list', '--yaml'], ['hosts', 'cordon'], ['hosts', 'cordon', A, B], ['hosts', 'cordon', A, '--json'], ['hosts', 'drain', A, '--yaml']]) {
    t.same(await admin(env, ...argv), { code: 2, out: [], err: usage }, argv.join(' ') || '(nothing)');
  }
  t.same((await db.q().selectFrom('hosts').select(['id', 'state']).orderBy('id').execute()), [
    { id: A, state: 'active' }, { id: B, state: 'cordoned' }, { id: C, state: 'down' },
  ], 'only the moves asked for were made');

  // The executable: DATABASE_URL from the environment; the URL never printed, even when it is refused.
  const entry = await run(process.execPath, ['--import=@tapjs/typescript/import', ENTRY, 'hosts', 'list', '--json'], { env: { ...process.env, DATABASE_URL: server.url } });
  t.same(JSON.parse(entry.stdout).hosts.map((h: { id: string }) => h.id), [A, B, C]);
  const refused: { code?: number; stdout: string; stderr: string } = await run(process.execPath, ['--import=@tapjs/typescript/import', ENTRY, 'hosts', 'list'], {
    env: { ...process.env, DATABASE_URL: 'mysql://root:hunter2@db/x' },
  }).catch((e: { code: number; stdout: string; stderr: string }) => e);
  t.same([refused.code, refused.stdout, refused.stderr], [2, '', 'computer-admin: DATABASE_URL must be a postgres:// or postgresql:// URL\n']);
});

t.test('SQLite: DATA_DIR read when DATABASE_URL is unset; a missing deployment is refused, never created', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-admin-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'control-plane.sqlite');
  t.same(await admin({ DATA_DIR: dir }, 'hosts', 'list'), { code: 1, out: [], err: [`computer-admin: no deployment at ${file} (set DATABASE_URL, or DATA_DIR to the control plane's)`] });
  t.notOk(fs.existsSync(file), 'nothing created');
  const db = openDb(file);
  t.teardown(() => db.close());
  await seed(db);
  t.same(await admin({ DATA_DIR: dir }, 'hosts', 'list'), { code: 0, out: TABLE, err: [] });
  t.same(await admin({ DATA_DIR: dir }, 'hosts', 'cordon', A), { code: 0, out: [`${A}: cordoned (was active)`], err: [] });
  t.same(await admin({ DATA_DIR: dir }, 'hosts', 'drain', A), {
    code: 1, out: [], err: ['computer-admin: hosts drain needs a PostgreSQL deployment (DATABASE_URL): a SQLite deployment is one host, with nowhere to move machines to'],
  });
  t.equal((await hostsRepo(db).get(A))?.state, 'cordoned', 'refused: nothing changed');
});

t.test('heartbeat ages', async (t) => {
  t.same([null, -5, 0, 1499, 59_949, 60_000, 3_599_999, 3_600_000, 172_799_999, 172_800_000].map(formatAge), [
    'never', '0.0 s ago', '0.0 s ago', '1.5 s ago', '59.9 s ago', '1 min ago', '59 min ago', '1 h ago', '47 h ago', '2 d ago',
  ]);
});

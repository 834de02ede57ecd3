/**
 * The host registry (store/repos/hosts.ts) and the cluster keys (store/repos/cluster-keys.ts) on SQLite and a real,
 * throwaway PostgreSQL: a driver's takeover registers the host and bumps its epoch; a stale driver's heartbeat and
 * fenced writes fail; a silent host is marked down (compare-and-set on what was read) and comes back active with a
 * new epoch; machines recorded before hosts existed are adopted by the only host; the operator's cordon moves; one
 * key for every process.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { openDb, type Db } from '../../../control-plane/src/store/db.js';
import type { Engine } from '../../../control-plane/src/store/engine/migrations.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { clusterKeysRepo } from '../../../control-plane/src/store/repos/cluster-keys.js';
import { hostsRepo, stillDriving, type HostRegistration } from '../../../control-plane/src/store/repos/hosts.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';

const T0 = '2026-01-01T00:00:00.000Z';
const CAPACITY = { cores: 2, memory_bytes: 25769803776, disk_bytes: 107374182400, machines: { small: 4, standard: 2, large: 1 } };
const A: HostRegistration = { id: 'host_aaaaaaaaaaaaaaaaaaaaaaaa', region: 'default', capacity: CAPACITY, internalUrl: 'http://10.0.0.1:18781' };
const B: HostRegistration = { id: 'host_bbbbbbbbbbbbbbbbbbbbbbbb', region: 'eu-west', capacity: { ...CAPACITY, cores: 8 }, internalUrl: 'http://10.0.0.2:18781' };

let cluster: Promise<TestPostgres> | null = null;
let databases = 0;
async function open(t: Test, engine: Engine): Promise<Db> {
  let db: Db;
  if (engine === 'postgres') {
    cluster ??= startPostgres().then((pg) => (t.context.top.teardown(pg.stop), pg));
    db = await openStoreDb({ databaseUrl: await (await cluster).createDatabase(`hosts_${++databases}`), dataDir: '/nonexistent' });
  } else {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-repo-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    db = openDb(path.join(dir, 'control-plane.sqlite'));
  }
  t.teardown(() => db.close());
  return db;
}
t.context.top = t;

async function machine(db: Db, id: string, hostId: string | null, over: { deleted_at?: string } = {}): Promise<void> {
  await db.q().insertInto('machines').values({
    id, org_id: 'org_1', name: id, size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'tok',
    created_by_kind: 'user', created_by_id: 'usr_1', created_at: T0, updated_at: T0, state_changed_at: T0, deleted_at: over.deleted_at ?? null, host_id: hostId,
  }).execute();
}

/** A fenced machine write, as the driver's state writes will carry it. */
const fencedWrite = async (db: Db, id: string, fence: { hostId: string; epoch: number }) =>
  Number((await db.q().updateTable('machines').set({ updated_at: '2026-01-02T00:00:00.000Z' }).where('id', '=', id).where(stillDriving(fence)).executeTakeFirst()).numUpdatedRows);

for (const engine of ['sqlite', 'postgres'] as const) {
  t.test(`${engine}: takeover, heartbeat, fence, down, return, adoption, cordon`, async (t) => {
    const db = await open(t, engine);
    const hosts = hostsRepo(db);
    await db.q().insertInto('organizations').values({ id: 'org_1', name: 'o', personal: 0, created_at: T0 }).execute();
    // Two machines recorded before hosts existed (one deleted): the first host to register adopts them.
    await machine(db, 'mch_old', null);
    await machine(db, 'mch_gone', null, { deleted_at: T0 });

    const first = await hosts.takeOver(A);
    t.same(first, { epoch: 1, adopted: 2 }, 'registered at epoch 1; the only host adopts the machines with no host');
    const row = (await hosts.get(A.id))!;
    t.match(row, { id: A.id, region: 'default', state: 'active', epoch: 1, internal_url: 'http://10.0.0.1:18781', capacity: CAPACITY });
    t.match(row.heartbeat_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, "the database's clock, in the store's format");
    t.equal(row.heartbeat_at, row.updated_at, "one instant per statement");

    // A second host: registered, adopts nothing (the first host holds the old machines).
    await machine(db, 'mch_late', null);
    t.same(await hosts.takeOver(B), { epoch: 1, adopted: 0 });
    t.same((await db.q().selectFrom('machines').select(['id', 'host_id']).orderBy('id').execute()), [
      { id: 'mch_gone', host_id: A.id }, { id: 'mch_late', host_id: null }, { id: 'mch_old', host_id: A.id },
    ]);

    // A new driver on host A (the old one's lock lost): epoch 2. The old driver's heartbeat and writes fail.
    const second = await hosts.takeOver({ ...A, internalUrl: 'http://10.0.0.1:18782' });
    t.same(second, { epoch: 2, adopted: 0 });
    t.equal(await hosts.heartbeat({ hostId: A.id, epoch: 1 }), false, "the stale driver's heartbeat CAS fails");
    t.equal(await hosts.heartbeat({ hostId: A.id, epoch: 2 }), true, "the sitting driver's succeeds");
    t.equal(await fencedWrite(db, 'mch_old', { hostId: A.id, epoch: 1 }), 0, 'a write fenced by the old epoch changes nothing');
    t.equal(await fencedWrite(db, 'mch_old', { hostId: A.id, epoch: 2 }), 1, 'the current fence writes');
    t.equal(await fencedWrite(db, 'mch_old', { hostId: B.id, epoch: 2 }), 0, "another host's id with the same number is no fence");

    const listed = await hosts.list();
    t.match(listed.now, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    t.same(listed.hosts.map((h) => [h.id, h.region, h.state, h.epoch, h.machines, h.capacity.cores]), [
      [A.id, 'default', 'active', 2, 1, 2],
      [B.id, 'eu-west', 'active', 1, 0, 8],
    ], 'in id order, live machines counted');

    // Down: nothing is down while heartbeats are fresh; host B silent for 11 s is marked, its epoch bumped.
    t.same(await hosts.sweepDown(), []);
    await db.q().updateTable('hosts').set({ heartbeat_at: new Date(Date.parse(listed.now) - 11_000).toISOString() }).where('id', '=', B.id).execute();
    t.same(await hosts.sweepDown(), [B.id], 'the silent host is marked down');
    t.match(await hosts.get(B.id), { state: 'down', epoch: 2 });
    t.same(await hosts.sweepDown(), [], 'once');
    t.equal(await hosts.heartbeat({ hostId: B.id, epoch: 1 }), false, "the down host's old driver cannot heartbeat");
    t.equal(await hosts.heartbeat({ hostId: B.id, epoch: 2 }), false, 'nor can anyone while the host is down');
    await machine(db, 'mch_b', B.id);
    t.equal(await fencedWrite(db, 'mch_b', { hostId: B.id, epoch: 2 }), 0, 'a down host fences every write');
    t.same(await hosts.operate(B.id, 'cordon'), { ok: false, from: 'down', reason: 'the host is down: it takes no new machines until its driver returns (then cordon it)' });

    // It comes back: a takeover makes it active at epoch 3.
    t.same(await hosts.takeOver(B), { epoch: 3, adopted: 0 });
    t.match(await hosts.get(B.id), { state: 'active', epoch: 3 });

    // Operators: cordon, again (no change), uncordon; an unknown host.
    t.same(await hosts.operate(A.id, 'cordon'), { ok: true, from: 'active', to: 'cordoned', changed: true });
    t.same(await hosts.operate(A.id, 'cordon'), { ok: true, from: 'cordoned', to: 'cordoned', changed: false });
    t.equal(await hosts.heartbeat({ hostId: A.id, epoch: 2 }), true, 'a cordoned host still heartbeats');
    t.same(await hosts.takeOver(A), { epoch: 3, adopted: 0 });
    t.match(await hosts.get(A.id), { state: 'cordoned' }, 'a new driver keeps the cordon');
    t.same(await hosts.operate(A.id, 'uncordon'), { ok: true, from: 'cordoned', to: 'active', changed: true });
    t.same(await hosts.operate('host_nosuchhostnosuchhostnosu', 'cordon'), { ok: false, reason: 'no_such_host' });
  });

  t.test(`${engine}: a machine's host and its row in one query (ofMachine, the owner check's read)`, async (t) => {
    const db = await open(t, engine);
    const hosts = hostsRepo(db);
    await db.q().insertInto('organizations').values({ id: 'org_1', name: 'o', personal: 0, created_at: T0 }).execute();
    await hosts.takeOver(A);
    await hosts.takeOver(B);
    await machine(db, 'mch_a', A.id);
    await machine(db, 'mch_none', null);
    await machine(db, 'mch_deleted', A.id, { deleted_at: T0 });
    await db.q().updateTable('hosts').set({ state: 'down' }).where('id', '=', B.id).execute();
    await machine(db, 'mch_b', B.id);
    t.same(await hosts.ofMachine('mch_a'), { hostId: A.id, host: { state: 'active', internal_url: 'http://10.0.0.1:18781' } });
    t.same(await hosts.ofMachine('mch_b'), { hostId: B.id, host: { state: 'down', internal_url: 'http://10.0.0.2:18781' } });
    t.same(await hosts.ofMachine('mch_none'), { hostId: null, host: undefined }, 'recorded before hosts');
    t.equal(await hosts.ofMachine('mch_deleted'), undefined, 'a deleted machine is no live machine');
    t.equal(await hosts.ofMachine('mch_nosuch'), undefined);
  });

  t.test(`${engine}: the sweep's compare-and-set loses to a heartbeat that landed after its read`, async (t) => {
    const db = await open(t, engine);
    const hosts = hostsRepo(db);
    const { epoch } = await hosts.takeOver(A);
    const { now } = await hosts.list();
    await db.q().updateTable('hosts').set({ heartbeat_at: new Date(Date.parse(now) - 60_000).toISOString() }).execute();
    // The sweep reads the silent row, then the driver's heartbeat lands before the sweep writes.
    const read = (await hosts.get(A.id))!;
    t.equal(await hosts.heartbeat({ hostId: A.id, epoch }), true);
    t.equal(await hosts.markDown(read), false, 'not marked: the heartbeat it read is no longer the row');
    t.match(await hosts.get(A.id), { state: 'active', epoch });
  });

  t.test(`${engine}: the internal channel's key is created once and read back`, async (t) => {
    const db = await open(t, engine);
    const keys = clusterKeysRepo(db);
    const first = await keys.getOrCreate('internal-channel', () => Buffer.alloc(32, 1));
    t.same(first, Buffer.alloc(32, 1));
    t.same(await keys.getOrCreate('internal-channel', () => Buffer.alloc(32, 2)), Buffer.alloc(32, 1), 'the first key stays');
    t.same(await keys.getOrCreate('other', () => Buffer.alloc(32, 3)), Buffer.alloc(32, 3), 'one per name');
  });
}

t.test('postgres: processes asking at once all get one key', async (t) => {
  const url = await (await (cluster ??= startPostgres().then((pg) => (t.teardown(pg.stop), pg)))).createDatabase('keys_race');
  const dbs = await Promise.all([1, 2, 3].map(() => openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' })));
  t.teardown(async () => {
    for (const db of dbs) await db.close();
  });
  const got = await Promise.all(dbs.flatMap((db, i) => [0, 1, 2].map((j) => clusterKeysRepo(db).getOrCreate('internal-channel', () => Buffer.alloc(32, 10 * i + j)))));
  t.equal(new Set(got.map((k) => k.toString('hex'))).size, 1, 'nine concurrent callers, one key');
});

/**
 * The host driver's election (control-plane/src/cluster/host-driver.ts) with real processes on one real PostgreSQL:
 * two processes of one host → exactly one drives, at epoch 1; kill -9 of the driver → the other takes over at epoch
 * 2; a driver whose host is declared down (its epoch moved under it) fails its heartbeat's compare-and-set, stops its
 * work, lets its lock go and takes over again at a new epoch; processes of another host drive that host, at once.
 * On SQLite the one process always drives. Takeover times are measured and printed, never asserted.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { driveHost, hostLockKey } from '../../../control-plane/src/cluster/host-driver.js';
import { alwaysLeader, DEPLOYMENT_LEADER_KEY } from '../../../control-plane/src/cluster/leader.js';
import { openDb } from '../../../control-plane/src/store/db.js';
import { hostsRepo, type HostFence } from '../../../control-plane/src/store/repos/hosts.js';
import { childGroup, type ChildLine } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';

const HOST = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
const OTHER = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';
const settled = (l: ChildLine) => l.state === 'leading' || l.state === 'following';

t.test('lock keys: stable per host, distinct between hosts and from the deployment leader', async (t) => {
  t.equal(hostLockKey(HOST), hostLockKey(HOST));
  t.not(hostLockKey(HOST), hostLockKey(OTHER));
  t.not(hostLockKey(HOST), BigInt(DEPLOYMENT_LEADER_KEY));
  t.equal(hostLockKey('host_0123456789abcdefghijklmn'), -7133617500275500824n, 'pinned (sha256 of "computer host driver\\0" + id, first 8 bytes, signed; computed with Python): a key never changes between releases');
});

t.test('two processes of one host on PostgreSQL: one driver; kill -9 → the other at epoch+1; fenced → resigns and returns', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const spawnChild = childGroup(t, { mode: 'host-driver', url: server.url, hostId: HOST, intervalMs: 200, heartbeatMs: 200 });
  const a = spawnChild('a', {});
  const b = spawnChild('b', {});
  const [sa, sb] = await Promise.all([a.next(settled), b.next(settled)]);
  t.same([sa.state, sb.state].sort(), ['following', 'leading'], 'exactly one of two drives');
  const [driver, other] = sa.state === 'leading' ? [a, b] : [b, a];
  t.equal((await driver.next((l) => l.driving !== undefined)).driving, 1, 'the first takeover registers the host at epoch 1');
  t.notOk(other.lines.some((l) => l.driving !== undefined), 'the other process does not drive');

  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  t.teardown(() => admin.end());
  const row = async () => (await admin.query<{ state: string; epoch: string; internal_url: string }>('SELECT state, epoch, internal_url FROM hosts WHERE id = $1', [HOST])).rows[0]!;
  t.same(await row(), { state: 'active', epoch: '1', internal_url: `http://127.0.0.1/${String(driver.proc.pid)}` });

  const killedAt = Date.now();
  await driver.kill9();
  const took = await other.next((l) => l.driving !== undefined);
  t.equal(took.driving, 2, 'the survivor takes over with epoch + 1');
  t.comment(`takeover after kill -9: ${took.at - killedAt} ms (attempts every 200 ms)`);
  t.same(await row(), { state: 'active', epoch: '2', internal_url: `http://127.0.0.1/${String(other.proc.pid)}` });

  // Another host's processes drive their own host at once: a different lock.
  const c = spawnChild('c', { hostId: OTHER });
  t.equal((await c.next(settled)).state, 'leading', "another host's process drives that host");
  t.equal((await c.next((l) => l.driving !== undefined)).driving, 1);

  // The host is declared down under its sitting driver (what the deployment leader's sweep does: state down, epoch
  // bumped). Its next heartbeat fails: it stops its work, lets the lock go and takes over again, the host active.
  const from = other.lines.length;
  await admin.query("UPDATE hosts SET state = 'down', epoch = epoch + 1 WHERE id = $1", [HOST]);
  await other.next((l) => l.log === 'host.driver_fenced', from);
  await other.next((l) => l.work === 'stop', from);
  await other.next((l) => l.state === 'disconnected', from);
  t.equal((await other.next((l) => l.driving !== undefined, from)).driving, 4, 'back at a new epoch (down made 3, the return 4)');
  t.same(await row(), { state: 'active', epoch: '4', internal_url: `http://127.0.0.1/${String(other.proc.pid)}` });

  // Which session drives: visible in pg_locks by the host's key.
  const key = hostLockKey(HOST);
  const holders = await admin.query<{ application_name: string }>(
    `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 1`,
    [Number(BigInt.asUintN(64, key) >> 32n), Number(BigInt.asUintN(32, key))],
  );
  t.same(holders.rows, [{ application_name: 'computer-host-driver' }]);
});

t.test('SQLite: the single process always drives, heartbeats, and a moved epoch makes it resign and return', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-driver-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db = openDb(path.join(dir, 'control-plane.sqlite'));
  t.teardown(() => db.close());
  const hosts = hostsRepo(db);
  const fences: HostFence[] = [];
  let wake: () => void = () => undefined;
  const nextFence = () => new Promise<void>((r) => (wake = r));
  const first = nextFence();
  const driver = driveHost({
    hosts,
    registration: { id: HOST, region: 'default', capacity: { cores: 1, memory_bytes: 1, disk_bytes: 1, machines: {} }, internalUrl: null },
    connect: alwaysLeader,
    work: { start: (f) => void (fences.push(f), wake()), stop: () => undefined },
    intervalMs: 50,
    heartbeatMs: 50,
  });
  t.teardown(() => driver.stop());
  await first;
  t.same(fences, [{ hostId: HOST, epoch: 1 }]);
  t.same(driver.fence, { hostId: HOST, epoch: 1 });
  const second = nextFence();
  await db.q().updateTable('hosts').set((eb) => ({ state: 'down', epoch: eb('epoch', '+', 1) })).execute();
  await second;
  t.same(fences, [{ hostId: HOST, epoch: 1 }, { hostId: HOST, epoch: 3 }], 'resigned and took over again');
  t.match(await hosts.get(HOST), { state: 'active', epoch: 3 });
  await driver.stop();
  t.equal(driver.state, 'stopped');
  t.equal(driver.fence, null);
});

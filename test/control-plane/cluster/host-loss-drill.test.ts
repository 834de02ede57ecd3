/**
 * Host loss with a real process (issue 25 item 5's drill, short of the three-host one): host A is driven by a child
 * process (cluster/host-driver.ts on its own advisory lock, heartbeating every HOST_HEARTBEAT_MS); this process is the
 * deployment leader running the `hosts` job at its real period. kill -9 of A's driver → A down and its machine
 * `error` (events pinned), host B's machine untouched; the time from the kill is measured and printed, never
 * asserted. A new driver of A takes over at the next epoch; the machine stays `error` until that driver's work
 * settles it (cluster/host-return.ts, tested in host-loss.test.ts), and is failed only once.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { controlPlaneJobs } from '../../../control-plane/src/cluster/jobs.js';
import { parseConfig } from '../../../control-plane/src/config.js';
import { HOST_HEARTBEAT_MS, HOST_LOSS_WITHIN_MS } from '../../../control-plane/src/domain/host-liveness.js';
import { createServices } from '../../../control-plane/src/services/index.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { createStore } from '../../../control-plane/src/store/store.js';
import { FakeSubstrate } from '../../../control-plane/src/substrate/fake.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL } from '../../helpers/control-plane.js';
import { childGroup, type ChildLine } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';
import { machineRow, seedOrg } from '../../helpers/store-engines.js';

const A = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';
const CAPACITY = { cores: 2, memory_bytes: 1, disk_bytes: 1, machines: { small: 0 } };
const settled = (l: ChildLine) => l.state === 'leading' || l.state === 'following';

t.test('kill -9 of a host driver: its machine error within the sweep, the other host untouched; its return is epoch + 2', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'host-loss-drill-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db = await openStoreDb({ databaseUrl: server.url, dataDir: dir });
  t.teardown(() => db.close());
  const config = parseConfig({ PUBLIC_BASE_URL, DATA_DIR: dir, WARM_POOL_PER_SIZE: '0', DATABASE_URL: server.url });
  const leader = await createServices({ config, store: createStore(db), passwordCost: FAST_SCRYPT, substrate: new FakeSubstrate(), readyProbe: false });
  const store = leader.store;
  await seedOrg(store, 'org_a', 'usr_a');

  const spawnDriver = childGroup(t, { mode: 'host-driver', url: server.url, hostId: A, intervalMs: 200, heartbeatMs: HOST_HEARTBEAT_MS });
  const driver = spawnDriver('a1', {});
  t.equal((await driver.next(settled)).state, 'leading');
  t.equal((await driver.next((l) => l.driving !== undefined)).driving, 1, "A's driver took over at epoch 1");
  // B: registered, its heartbeat pinned an hour ahead of the database's clock (never silent, however slow this is).
  await store.hosts.takeOver({ id: B, region: 'default', capacity: CAPACITY, internalUrl: null });
  await store.db.q().updateTable('hosts').set({ heartbeat_at: new Date(Date.now() + 3_600_000).toISOString() }).where('id', '=', B).execute();
  // Created now: metering a move from a creation months ago (the fixture's T0) would be most of the transaction.
  const created = new Date().toISOString();
  await store.machines.insert(machineRow('mch_on_a', { host_id: A, created_at: created, state_changed_at: created }));
  await store.machines.insert(machineRow('mch_on_b', { host_id: B, created_at: created, state_changed_at: created }));

  const logs: Array<Record<string, unknown>> = [];
  const job = controlPlaneJobs(leader, { log: (l) => logs.push(l), resumeMetering: false, substrate: null }).find((j) => j.name === 'hosts')!;
  await job.start();
  t.teardown(() => job.stop());
  t.match(await store.hosts.get(A), { state: 'active', epoch: 1 }, 'A is alive while its driver beats');

  const killedAt = Date.now();
  await driver.kill9();
  while ((await store.machines.byId('mch_on_a'))?.state !== 'error') await new Promise((r) => setTimeout(r, 100));
  const tookMs = Date.now() - killedAt;
  const down = (await store.hosts.get(A))!;
  t.comment(`kill -9 → its machine error: ${tookMs} ms (stated bound ${HOST_LOSS_WITHIN_MS} ms after the last heartbeat); on the database's clock, last heartbeat → marked down: ${Date.parse(down.updated_at) - Date.parse(down.heartbeat_at!)} ms`);
  t.match(await store.hosts.get(A), { state: 'down', epoch: 2 });
  t.match(await store.hosts.get(B), { state: 'active', epoch: 1 });
  t.equal((await store.machines.byId('mch_on_b'))?.state, 'running', "B's machine untouched");
  const events = async (id: string) => (await leader.events.list(id, { limit: 10 })).data.reverse().map((e) => [e.type, e.data]);
  const failed = [
    ['host.unhealthy', { reason: 'host_lost' }],
    ['machine.failed', { from: 'running', to: 'error', operation: 'host', code: 'compute_unavailable', reason: 'host_lost' }],
  ];
  t.same(await events('mch_on_a'), failed);
  t.same(await events('mch_on_b'), []);
  t.same(logs.filter((l) => l.event === 'host.down'), [{ event: 'host.down', host: A, machines_failed: 1 }]);

  // A's host comes back: a new driver takes over at epoch 3; the sweep does not fail anything again.
  const again = spawnDriver('a2', {});
  t.equal((await again.next((l) => l.driving !== undefined)).driving, 3, 'the returning driver takes over at epoch 3');
  t.match(await store.hosts.get(A), { state: 'active', epoch: 3 });
  await again.stop();
  await job.stop();
  t.same(await events('mch_on_a'), failed, 'failed once');
  t.same(logs.filter((l) => l.event === 'host.down').length, 1);
});

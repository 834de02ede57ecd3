/**
 * Host loss on a real, throwaway PostgreSQL (issue 25 item 5): two hosts registered by takeover (fake registrations),
 * machines on each; host A goes silent (its heartbeat moved into the past on the database's clock) → the leader's
 * `hosts` job marks it down and, in the same transaction, its machines `error` with `machine.failed {reason:
 * host_lost}` and `host.unhealthy` (pinned literally), host B's untouched; a start answers 409 naming the cause; A's
 * old driver, still holding its fence, writes nothing (a casState with the old fence changes no row; its substrate
 * watch cannot fail B's machine); A takes over again → its lost machines with a disk there come back `stopped`, once,
 * a machine moved to B meanwhile and one whose disk is not on A are left as they are.
 * Three "processes" (the leader, A's, B's), each its own services over its own pool on one database.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { beginDriving } from '../../../control-plane/src/cluster/host-return.js';
import { controlPlaneJobs } from '../../../control-plane/src/cluster/jobs.js';
import { parseConfig } from '../../../control-plane/src/config.js';
import type { OrgPrincipal } from '../../../control-plane/src/context.js';
import { createServices, type Services } from '../../../control-plane/src/services/index.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import type { HostFence, HostRegistration } from '../../../control-plane/src/store/repos/hosts.js';
import type { MachineState } from '../../../shared/schemas/machine.js';
import { createStore } from '../../../control-plane/src/store/store.js';
import { FakeSubstrate } from '../../../control-plane/src/substrate/fake.js';
import { AppError } from '../../../shared/errors.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL } from '../../helpers/control-plane.js';
import { startPostgres } from '../../helpers/postgres.js';
import { machineRow, seedOrg } from '../../helpers/store-engines.js';

const CAPACITY = { cores: 2, memory_bytes: 25769803776, disk_bytes: 107374182400, machines: { small: 4 } };
const A: HostRegistration = { id: 'host_aaaaaaaaaaaaaaaaaaaaaaaa', region: 'default', capacity: CAPACITY, internalUrl: 'http://127.0.0.1:18761' };
const B: HostRegistration = { id: 'host_bbbbbbbbbbbbbbbbbbbbbbbb', region: 'default', capacity: CAPACITY, internalUrl: 'http://127.0.0.1:18762' };
const SPEC = { resources: { vcpu: 1, memory_mb: 512, disk_gb: 4 }, source: { kind: 'base' as const } };

const pgServer = startPostgres();
t.teardown(async () => (await pgServer).stop());

async function processOn(t: Test, url: string, substrate: FakeSubstrate): Promise<Services> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'host-loss-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db = await openStoreDb({ databaseUrl: url, dataDir: dir });
  t.teardown(() => db.close());
  const config = parseConfig({ PUBLIC_BASE_URL, DATA_DIR: dir, WARM_POOL_PER_SIZE: '0', DATABASE_URL: url });
  return createServices({ config, store: createStore(db), passwordCost: FAST_SCRYPT, substrate, readyProbe: false, hostResources: { memory_mb: 1 << 20, vcpu: 1 << 10 } });
}

/** A machine's events, oldest first, as type and data. */
async function eventsOf(s: Services, id: string): Promise<Array<[string, Record<string, unknown>]>> {
  return (await s.events.list(id, { limit: 100 })).data.reverse().map((e) => [e.type, e.data]);
}

t.test('a silent host is down within the sweep, its machines error once; its old fence writes nothing; back → stopped', async (t) => {
  const url = await (await pgServer).createDatabase('host_loss');
  const fakeA = new FakeSubstrate();
  const fakeB = new FakeSubstrate();
  const leader = await processOn(t, url, new FakeSubstrate());
  const onA = await processOn(t, url, fakeA);
  const onB = await processOn(t, url, fakeB);
  const store = leader.store;
  await seedOrg(store, 'org_a', 'usr_a');
  await seedOrg(store, 'org_b', 'usr_b');

  const fenceA: HostFence = { hostId: A.id, epoch: (await onA.store.hosts.takeOver(A)).epoch };
  const fenceB: HostFence = { hostId: B.id, epoch: (await onB.store.hosts.takeOver(B)).epoch };
  t.same([fenceA.epoch, fenceB.epoch], [1, 1]);
  await beginDriving(onA, fenceA, () => undefined);
  await beginDriving(onB, fenceB, () => undefined);

  // On A: a1 running, a2 stopped, a3 already error (its guest crashed), a4 running with its disk not on A (lost
  // with the host's disk), a5 running (moved to B while A is down), a6 of another organization, starting.
  const rows: Array<[string, string, MachineState, string]> = [
    ['mch_a1', 'org_a', 'running', A.id], ['mch_a2', 'org_a', 'stopped', A.id], ['mch_a3', 'org_a', 'error', A.id],
    ['mch_a4', 'org_a', 'running', A.id], ['mch_a5', 'org_a', 'running', A.id], ['mch_a6', 'org_b', 'starting', A.id],
    ['mch_b1', 'org_a', 'running', B.id], ['mch_a7', 'org_a', 'running', A.id],
  ];
  // Created now: metering a move from a creation months ago (the fixture's T0) would be most of each transaction.
  const created = new Date().toISOString();
  for (const [id, org, state, host] of rows) {
    await store.machines.insert(machineRow(id, { org_id: org, state, host_id: host, created_by_id: org === 'org_a' ? 'usr_a' : 'usr_b', created_at: created, state_changed_at: created }));
  }
  await leader.events.append('org_a', 'mch_a3', 'machine.failed', { from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: 'exited' });
  for (const id of ['mch_a1', 'mch_a5', 'mch_a6', 'mch_a7']) await fakeA.create({ id, ...SPEC });
  await fakeA.create({ id: 'mch_a2', ...SPEC }, { start: false });
  await fakeA.create({ id: 'mch_a3', ...SPEC }, { start: false });
  await fakeB.create({ id: 'mch_b1', ...SPEC });
  // A driver's reconcile and watch look at its own host's machines only (A's are absent on B's substrate).
  await onB.machines.reconcile();
  await onB.machines.watchPass();
  t.same(fakeB.calls.filter((c) => c.includes('mch_a')), [], "B's reconcile and watch never ask its substrate about A's machines");
  t.equal(await store.machines.byId('mch_a1').then((m) => m?.state), 'running');

  // A goes silent: its last heartbeat long ago on the database's clock. B's is pinned an hour ahead of the clock, so
  // however slow this machine is, B never looks silent (no driver beats here).
  await store.db.q().updateTable('hosts').set({ heartbeat_at: '2000-01-01T00:00:00.000Z' }).where('id', '=', A.id).execute();
  await store.db.q().updateTable('hosts').set({ heartbeat_at: new Date(Date.now() + 3_600_000).toISOString() }).where('id', '=', B.id).execute();
  const logs: Array<Record<string, unknown>> = [];
  const hostsJob = controlPlaneJobs(leader, { log: (l) => logs.push(l), resumeMetering: false, substrate: null, periodsMs: { hosts: 50 } }).find((j) => j.name === 'hosts');
  t.match(hostsJob, { role: 'deployment' }, 'on PostgreSQL the leader runs the hosts job');
  await hostsJob!.start();
  while ((await store.hosts.get(A.id))?.state !== 'down') await new Promise((r) => setTimeout(r, 20));
  await hostsJob!.stop();
  t.match(await store.hosts.get(A.id), { state: 'down', epoch: 2 }, "A is down, its epoch bumped (its driver's fence is old)");
  t.match(await store.hosts.get(B.id), { state: 'active', epoch: 1 }, 'B untouched');
  t.same(logs.filter((l) => l.event === 'host.down'), [{ event: 'host.down', host: A.id, machines_failed: 6 }]);

  const state = async (id: string) => (await store.machines.byId(id))?.state;
  t.same(
    await Promise.all(['mch_a1', 'mch_a2', 'mch_a3', 'mch_a4', 'mch_a5', 'mch_a6', 'mch_b1'].map(state)),
    ['error', 'error', 'error', 'error', 'error', 'error', 'running'],
  );
  const lost = (from: string) => ['machine.failed', { from, to: 'error', operation: 'host', code: 'compute_unavailable', reason: 'host_lost' }];
  const unhealthy = ['host.unhealthy', { reason: 'host_lost' }];
  t.same(await eventsOf(leader, 'mch_a1'), [unhealthy, lost('running')]);
  t.same(await eventsOf(leader, 'mch_a2'), [unhealthy, lost('stopped')]);
  t.same(await eventsOf(leader, 'mch_a3'), [
    ['machine.failed', { from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: 'exited' }], unhealthy,
  ], 'already error: told, not failed again');
  t.same(await eventsOf(leader, 'mch_a6'), [unhealthy, lost('starting')], 'the other organization is told too');
  t.same(await eventsOf(leader, 'mch_b1'), [], "B's machine: nothing");
  const all = JSON.stringify(await Promise.all(['mch_a1', 'mch_a2', 'mch_a3', 'mch_a6'].map((id) => eventsOf(leader, id))));
  t.notMatch(all, /host_a|127\.0\.0\.1/, 'no host id or address in a tenant-facing event');

  // A start answers 409 naming the cause and the way out, and changes nothing.
  const principal: OrgPrincipal = {
    kind: 'user', user_id: 'usr_a', auth_session_id: null, api_key_id: null, org_id: 'org_a', role: 'owner', scopes: null, permissions: new Set(), via_cookie: false,
  };
  const refused = await leader.machines.start(principal, 'mch_a1').catch((e: unknown) => e);
  t.ok(refused instanceof AppError);
  t.match(refused, { code: 'conflict', message: "The machine's host is down (host_lost) and its disk is on that host, so it cannot start there or elsewhere. When the host returns, the machine is stopped and can be started. To carry on now, create a new machine; a snapshot of this machine serves only if its layers were copied to a host that is up (by a fork or a template made from it elsewhere)." });
  t.equal(await state('mch_a1'), 'error');

  // A's old driver, not yet aware: a casState with its old fence changes no row (the leader's, unfenced, would).
  t.equal(await onA.store.machines.casState('mch_a1', 'error', 'stopped', '2026-11-26T00:00:00.000Z', fenceA), null, 'the old fence changes no row');
  t.equal(await state('mch_a1'), 'error');
  t.same(onA.hostFence.current, fenceA, "A's services still hold the old fence");
  // Its substrate watch finds B's running machine absent on A: without the fence it would fail it.
  t.same(await onA.machines.watchPass(), [], "A's watch records nothing");
  t.equal(await state('mch_b1'), 'running', "B's machine still running");

  // While A is down, a7 is deleted through another host's process (no driver to send it to): the machine goes now,
  // its disk stays on A until A's return destroys it.
  await onB.machines.remove(principal, 'mch_a7');
  t.equal(await state('mch_a7'), undefined, 'deleted while its host is down');
  t.same(await eventsOf(leader, 'mch_a7'), [unhealthy, lost('running'), ['machine.deleted', { from: 'error', by: { type: 'user', id: 'usr_a' } }]]);
  t.ok(fakeA.machines.has('mch_a7'), 'its disk is still on the lost host');
  const twice = await onB.machines.remove(principal, 'mch_a7').catch((e: unknown) => e);
  t.match(twice, { code: 'not_found' }, 'a second delete: gone');

  // While A is down, a5 is moved to B (a drain, a restore elsewhere): A's return must not touch it.
  await store.db.q().updateTable('machines').set({ host_id: B.id }).where('id', '=', 'mch_a5').execute();

  // A comes back: a takeover (epoch 3), then its work's first act; then again (a second takeover): events once.
  const back: HostFence = { hostId: A.id, epoch: (await onA.store.hosts.takeOver(A)).epoch };
  t.equal(back.epoch, 3);
  const returned: Array<Record<string, unknown>> = [];
  await beginDriving(onA, back, (l) => returned.push(l));
  t.same(returned, [{ event: 'host.returned', host: A.id, epoch: 3, stopped: 3, still_error: 1 }]);
  t.same(onA.hostFence.current, back);
  t.same(fakeA.machines.get('mch_a1')?.state, 'stopped', 'the guest that outlived its control plane was stopped');
  t.same(
    await Promise.all(['mch_a1', 'mch_a2', 'mch_a3', 'mch_a4', 'mch_a5', 'mch_a6', 'mch_b1'].map(state)),
    ['stopped', 'stopped', 'error', 'error', 'error', 'stopped', 'running'],
    'disks on A: stopped; a3 failed before (still error, startable); a4 has no disk on A; a5 is B\'s now',
  );
  // A's reconcile (the host jobs after beginDriving) destroys the disk of the machine deleted while A was down.
  await onA.machines.reconcile();
  t.notOk(fakeA.machines.has('mch_a7'), "the deleted machine's disk is destroyed on the host's return");
  t.equal(await state('mch_a7'), undefined);
  const again: HostFence = { hostId: A.id, epoch: (await onA.store.hosts.takeOver(A)).epoch };
  await beginDriving(onA, again, (l) => returned.push(l));
  t.equal(returned.length, 2);
  t.same(returned[1], { event: 'host.returned', host: A.id, epoch: 4, stopped: 0, still_error: 1 }, 'nothing settled twice');
  const back1 = ['machine.stopped', { from: 'error', to: 'stopped', by: { type: 'system', id: null }, reason: 'host_returned' }];
  t.same(await eventsOf(leader, 'mch_a1'), [unhealthy, lost('running'), back1]);
  t.same(await eventsOf(leader, 'mch_a6'), [unhealthy, lost('starting'), back1]);
  t.same(await eventsOf(leader, 'mch_a4'), [unhealthy, lost('running')]);
  t.same(await eventsOf(leader, 'mch_a5'), [unhealthy, lost('running')], 'moved to B: A acted on nothing');

  // The deployment's writes carry no fence; A's old fence still changes nothing now that the host is back.
  t.equal(await onA.store.machines.casState('mch_a2', 'stopped', 'error', '2026-11-26T00:00:00.000Z', fenceA), null);
});

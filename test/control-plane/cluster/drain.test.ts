/**
 * The drain (issue 25 item 6) on a real, throwaway PostgreSQL with the real store: `computer-admin hosts drain`
 * sets the host draining and follows the leader's drain (services/drain.ts) while it runs, with a fake substrate seam
 * (services/machine-move.ts) that records its calls — the orchestration isolated from the substrates.
 *
 * - Three hosts, four machines on A (two running, one stopped, one error) → each ends on B or C in the state it had,
 *   A ends empty; the progress lines pinned literally; the tenant sees stopped → running with a reason that says it
 *   moved, and no host id.
 * - The leader's job stopped between two steps (as a killed leader's lock is lost) → the next leader's job resumes
 *   the move: no step done is acted again.
 * - Nothing fits (the only other host cordoned) → the machine stays, the drain says why, once; room again → it moves.
 * - The seam not plugged in → nothing is stopped; the drain waits with the reason.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { runAdmin } from '../../../control-plane/src/admin/computer-admin.js';
import { drainText, lineFor } from '../../../control-plane/src/admin/drain.js';
import { drainJob } from '../../../control-plane/src/cluster/jobs.js';
import { parseConfig } from '../../../control-plane/src/config.js';
import { createDrain } from '../../../control-plane/src/services/drain.js';
import { createServices, type Services } from '../../../control-plane/src/services/index.js';
import { NOT_BUILT, type MachineMove, type MovingMachine } from '../../../control-plane/src/services/machine-move.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import type { HostRegistration } from '../../../control-plane/src/store/repos/hosts.js';
import { createStore } from '../../../control-plane/src/store/store.js';
import { FakeSubstrate } from '../../../control-plane/src/substrate/fake.js';
import type { MachineState } from '../../../shared/schemas/machine.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL } from '../../helpers/control-plane.js';
import { startPostgres } from '../../helpers/postgres.js';
import { machineRow, seedOrg } from '../../helpers/store-engines.js';

const CAPACITY = { cores: 2, memory_bytes: 25769803776, disk_bytes: 107374182400, machines: { small: 4 } };
const host = (id: string): HostRegistration => ({ id, region: 'default', capacity: CAPACITY, internalUrl: null });
const A = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';
const C = 'host_cccccccccccccccccccccccc';

const pgServer = startPostgres();
t.teardown(async () => (await pgServer).stop());

async function processOn(t: Test, url: string): Promise<Services> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'drain-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db = await openStoreDb({ databaseUrl: url, dataDir: dir });
  t.teardown(() => db.close());
  const config = parseConfig({ PUBLIC_BASE_URL, DATA_DIR: dir, WARM_POOL_PER_SIZE: '0', DATABASE_URL: url });
  return createServices({ config, store: createStore(db), passwordCost: FAST_SCRYPT, substrate: new FakeSubstrate(), readyProbe: false, hostResources: { memory_mb: 1 << 20, vcpu: 1 << 10 } });
}

/** The seam, faked: each call recorded as a line; `after` runs after a call (the test's hook to stop a leader). */
function recordingMove(calls: string[], after: (call: string) => void = () => undefined): MachineMove {
  const note = (line: string) => {
    calls.push(line);
    after(line);
  };
  return {
    ready: async () => undefined,
    stop: async (m: MovingMachine, from) => note(`stop ${m.id} on ${from}`),
    capture: async (m, from) => {
      note(`capture ${m.id} on ${from}`);
      return { chain: `chain-of-${m.id}` };
    },
    pull: async (m, chain, from, to) => {
      note(`pull ${chain} ${from} → ${to}`);
      return { bytes: 4096 };
    },
    makeDisk: async (m, chain, to) => note(`make disk ${m.id} from ${chain} on ${to}`),
    start: async (m, to) => note(`start ${m.id} on ${to}`),
  };
}

async function seed(s: Services, rows: Array<[string, MachineState]>, registrations: string[]): Promise<void> {
  await seedOrg(s.store, 'org_a', 'usr_a');
  for (const id of registrations) await s.store.hosts.takeOver(host(id));
  // Created now (metering a move from the fixture's T0 would be months of intervals), a millisecond apart: oldest first.
  const t0 = Date.now();
  for (const [i, [id, state]] of rows.entries()) {
    const at = new Date(t0 + i).toISOString();
    await s.store.machines.insert(machineRow(id, { state, host_id: A, created_at: at, state_changed_at: at }));
  }
}

const whereIs = async (s: Services) =>
  (await s.store.db.q().selectFrom('machines').select(['id', 'state', 'host_id']).orderBy('id').execute()).map((m) => `${m.id} ${m.state} on ${m.host_id}`);

/** A machine's events as the tenant reads them, oldest first. */
const tenantEvents = async (s: Services, id: string) => (await s.events.list(id, { limit: 100 })).data.reverse().map((e) => [e.type, e.data]);

t.test('drain HOST: four machines over three hosts, followed by the admin command until A is empty', async (t) => {
  const url = await (await pgServer).createDatabase('drain_three');
  const leader = await processOn(t, url);
  await seed(leader, [['mch_a1', 'running'], ['mch_a2', 'running'], ['mch_a3', 'stopped'], ['mch_a4', 'error']], [A, B, C]);
  const calls: string[] = [];
  const drain = createDrain({ store: leader.store, events: leader.events, leases: leader.leases, now: leader.now, move: recordingMove(calls) });

  const out: string[] = [];
  const err: string[] = [];
  let following!: () => void;
  const followed = new Promise<void>((r) => (following = r));
  const admin = runAdmin(['hosts', 'drain', A], { env: { DATABASE_URL: url }, out: (l) => (out.push(l), following()), err: (l) => err.push(l), pollMs: 20 });
  await followed;
  let done = false;
  const finished = admin.then((code) => ((done = true), code));
  // The leader's passes, one after another, until the admin command has seen the host empty.
  while (!done) {
    await drain.tick();
    await new Promise((r) => setTimeout(r, 10));
  }
  t.equal(await finished, 0);
  t.same(err, []);
  const moved = (n: number, id: string, to: string, steps: string[], state: string) => [
    `machine ${n} of 4 ${id}: moving to ${to} (was ${state})`,
    ...steps.map((s) => `machine ${n} of 4 ${id}: ${s} done${s === 'pull' ? ', 4096 bytes' : ''}`),
    `machine ${n} of 4 ${id}: on ${to}, ${state}`,
  ];
  const running = ['stop', 'capture', 'pull', 'make_disk', 'rehome', 'start'];
  const atRest = ['capture', 'pull', 'make_disk', 'rehome'];
  t.same(out, [
    `${A}: draining (was active), 4 machines to move; Ctrl-C stops following, the drain goes on`,
    ...moved(1, 'mch_a1', B, running, 'running'),
    ...moved(2, 'mch_a2', C, running, 'running'),
    ...moved(3, 'mch_a3', B, atRest, 'stopped'),
    ...moved(4, 'mch_a4', C, atRest, 'error'),
    `${A}: empty`,
  ]);
  t.same(await whereIs(leader), [`mch_a1 running on ${B}`, `mch_a2 running on ${C}`, `mch_a3 stopped on ${B}`, `mch_a4 error on ${C}`], 'each on another host, in the state it had');
  t.same(calls, [
    `stop mch_a1 on ${A}`, `capture mch_a1 on ${A}`, `pull chain-of-mch_a1 ${A} → ${B}`, `make disk mch_a1 from chain-of-mch_a1 on ${B}`, `start mch_a1 on ${B}`,
    `stop mch_a2 on ${A}`, `capture mch_a2 on ${A}`, `pull chain-of-mch_a2 ${A} → ${C}`, `make disk mch_a2 from chain-of-mch_a2 on ${C}`, `start mch_a2 on ${C}`,
    `capture mch_a3 on ${A}`, `pull chain-of-mch_a3 ${A} → ${B}`, `make disk mch_a3 from chain-of-mch_a3 on ${B}`,
    `capture mch_a4 on ${A}`, `pull chain-of-mch_a4 ${A} → ${C}`, `make disk mch_a4 from chain-of-mch_a4 on ${C}`,
  ], 'one machine at a time, each step once');
  const hosts = (await leader.store.hosts.list()).hosts.map((h) => `${h.id} ${h.state} ${h.machines}`);
  t.same(hosts, [`${A} draining 0`, `${B} active 2`, `${C} active 2`]);

  // The tenant: stopped, then running again, the reason saying it moved; no host named anywhere it can read.
  const seen = await tenantEvents(leader, 'mch_a1');
  t.same(seen, [
    ['machine.stopped', { from: 'running', to: 'stopped', by: { type: 'system', id: null }, reason: 'moving_to_another_host' }],
    ['machine.started', { from: 'stopped', to: 'running', by: { type: 'system', id: null }, reason: 'moved_to_another_host' }],
  ]);
  t.same(await tenantEvents(leader, 'mch_a3'), [], 'a stopped machine moves silently (nothing the tenant can see changed)');
  t.notMatch(JSON.stringify(seen), /host_/);

  // A host already draining is followed (empty at once); an unknown host is a clear refusal.
  const again: string[] = [];
  t.equal(await runAdmin(['hosts', 'drain', A], { env: { DATABASE_URL: url }, out: (l) => again.push(l), err: (l) => again.push(l), pollMs: 20 }), 0);
  t.same(again, [`${A}: draining (was draining), 0 machines to move; Ctrl-C stops following, the drain goes on`, `${A}: empty`]);
  const json: string[] = [];
  t.equal(await runAdmin(['hosts', 'drain', A, '--json'], { env: { DATABASE_URL: url }, out: (l) => json.push(l), err: (l) => json.push(l), pollMs: 20 }), 0);
  t.same(json.map((l) => JSON.parse(l)), [{ event: 'following', host: A, was: 'draining', machines: 0 }, { event: 'empty', host: A }], '--json: one object a line');
  const unknown: string[] = [];
  t.equal(await runAdmin(['hosts', 'drain', 'host_dddddddddddddddddddddddd'], { env: { DATABASE_URL: url }, out: (l) => unknown.push(l), err: (l) => unknown.push(l) }), 1);
  t.same(unknown, ['computer-admin: no host host_dddddddddddddddddddddddd']);
});

t.test('a leader stopped between two steps: the next one resumes the move, no step done acted again', async (t) => {
  const url = await (await pgServer).createDatabase('drain_resume');
  const first = await processOn(t, url);
  const second = await processOn(t, url);
  await seed(first, [['mch_r1', 'running']], [A, B]);
  t.same(await first.store.hosts.operate(A, 'drain'), { ok: true, from: 'active', to: 'draining', changed: true });

  const calls: string[] = [];
  let stopped: Promise<void> | null = null;
  const job1 = drainJob(first, recordingMove(calls, (call) => {
    if (call.startsWith('pull')) stopped = Promise.resolve(job1.stop());
  }), 20, () => undefined);
  await job1.start();
  while (!stopped) await new Promise((r) => setTimeout(r, 10));
  await stopped;
  t.same(calls, [`stop mch_r1 on ${A}`, `capture mch_r1 on ${A}`, `pull chain-of-mch_r1 ${A} → ${B}`], 'the first leader stopped after the pull');
  t.same(await whereIs(first), [`mch_r1 stopped on ${A}`], 'still on A, stopped, until its disk is on B');
  const steps = (await first.store.drain.records('mch_r1')).map((r) => (r.type === 'drain.step' ? `${r.step} ${r.phase}` : r.type));
  t.same(steps, ['drain.planned', 'stop begun', 'stop done', 'capture begun', 'capture done', 'pull begun', 'pull done'], 'its pull recorded done before it let go');

  const job2 = drainJob(second, recordingMove(calls), 20, () => undefined);
  await job2.start();
  t.teardown(() => job2.stop());
  while ((await whereIs(second))[0] !== `mch_r1 running on ${B}`) await new Promise((r) => setTimeout(r, 20));
  await job2.stop();
  t.same(calls.slice(3), [`make disk mch_r1 from chain-of-mch_r1 on ${B}`, `start mch_r1 on ${B}`], 'the second leader acted only what was left');
  t.equal((await first.store.drain.openMoves()).length, 0, 'the move is finished');
});

t.test('two leaders at once (one stale): each step is recorded once, every machine moved once', async (t) => {
  const url = await (await pgServer).createDatabase('drain_two_leaders');
  const one = await processOn(t, url);
  const two = await processOn(t, url);
  await seed(one, [['mch_t1', 'running'], ['mch_t2', 'stopped']], [A, B]);
  await one.store.hosts.operate(A, 'drain');
  const calls: string[] = [];
  const drains = [one, two].map((s) => createDrain({ store: s.store, events: s.events, leases: s.leases, now: s.now, move: recordingMove(calls) }));
  while ((await whereIs(one)).join() !== [`mch_t1 running on ${B}`, `mch_t2 stopped on ${B}`].join()) await Promise.all(drains.map((d) => d.tick()));
  await Promise.all(drains.map((d) => d.tick()));
  for (const [id, steps] of [['mch_t1', ['stop', 'capture', 'pull', 'make_disk', 'rehome', 'start']], ['mch_t2', ['capture', 'pull', 'make_disk', 'rehome']]] as const) {
    const records = await one.store.drain.records(id);
    t.same(records.filter((r) => r.type === 'drain.planned').length, 1, `${id}: planned once`);
    t.same(records.flatMap((r) => (r.type === 'drain.step' && r.phase === 'done' ? [r.step] : [])), steps, `${id}: each step done once`);
    t.same(records.flatMap((r) => (r.type === 'drain.step' && r.phase === 'begun' ? [r.step] : [])), steps.filter((x) => x !== 'rehome'), `${id}: each step begun once`);
    t.same(records.filter((r) => r.type === 'drain.finished').length, 1, `${id}: finished once`);
  }
  // The compare-and-set under it: a record made against a seq that is no longer the newest is refused.
  const row = (await one.store.machines.byId('mch_t1'))!;
  const newest = await one.store.drain.newestSeq('mch_t1');
  t.equal(await two.store.drain.append(row, newest - 1, { type: 'drain.waiting', from: A, reason: 'stale' }, new Date().toISOString()), null, 'stale: refused');
  t.equal(await two.store.drain.newestSeq('mch_t1'), newest, 'nothing recorded');
  const started = (await tenantEvents(one, 'mch_t1')).map(([type]) => type);
  t.same(started, ['machine.stopped', 'machine.started'], 'the tenant sees one stop and one start');
});

t.test('nothing fits: the machine stays and the drain says why, once; room again → it moves', async (t) => {
  const url = await (await pgServer).createDatabase('drain_waits');
  const leader = await processOn(t, url);
  await seed(leader, [['mch_w1', 'running']], [A, B]);
  await leader.store.hosts.operate(B, 'cordon');
  await leader.store.hosts.operate(A, 'drain');
  const calls: string[] = [];
  const drain = createDrain({ store: leader.store, events: leader.events, leases: leader.leases, now: leader.now, move: recordingMove(calls) });
  await drain.tick();
  await drain.tick();
  const lines = (await leader.store.drain.records('mch_w1')).map((r) => drainText(lineFor(r, 'mch_w1', 1, 1)!));
  t.same(lines, ['machine 1 of 1 mch_w1: waiting: No host has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.'],
    'the reason, recorded once however many passes');
  t.same(calls, []);
  t.same(await whereIs(leader), [`mch_w1 running on ${A}`], 'never dropped');
  t.same(await tenantEvents(leader, 'mch_w1'), [], 'the tenant sees nothing of the wait');

  await leader.store.hosts.operate(B, 'uncordon');
  await drain.tick();
  t.same(await whereIs(leader), [`mch_w1 running on ${B}`]);
});

t.test('the seam not plugged in (NOT_BUILT): nothing is stopped, the drain waits and says why', async (t) => {
  const url = await (await pgServer).createDatabase('drain_unplugged');
  const leader = await processOn(t, url);
  await seed(leader, [['mch_u1', 'running']], [A, B]);
  await leader.store.hosts.operate(A, 'drain');
  await createDrain({ store: leader.store, events: leader.events, leases: leader.leases, now: leader.now, move: NOT_BUILT }).tick();
  const lines = (await leader.store.drain.records('mch_u1')).map((r) => drainText(lineFor(r, 'mch_u1', 1, 1)!));
  t.same(lines, ['machine 1 of 1 mch_u1: waiting: Moving a machine between hosts is not built yet (the layer pull between hosts); the drain waits.']);
  t.same(await whereIs(leader), [`mch_u1 running on ${A}`], 'still running where it was');
});

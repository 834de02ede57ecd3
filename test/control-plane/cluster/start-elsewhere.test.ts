/**
 * A start of a stopped machine whose host is full (issue 25 item 2, restart on another host;
 * services/start-elsewhere.ts): two service stacks on one throwaway PostgreSQL, each host its own real btrfs layer
 * store and internal listener serving the layer and move routes (test/helpers/layer-channel.ts `serviceHosts`, compute
 * faked, disks real), each host's services moving machines through the real seam (cluster/machine-move.ts). The start
 * is asked of host a's process: the driver of the machine's host.
 *
 * - Host a full: the start moves the machine to host b (captured at rest on a, pulled, made, rehomed, started through
 *   b's host call) and answers it running there with its file; the tenant sees `machine.started` and no host id;
 *   host a's reconcile destroys its old disk, and no move pin is left on either host after their sweeps.
 * - Host a with room: started on host a, nothing moves (no export, nothing on host b, no move recorded).
 * - No host with room: 503 naming capacity, the machine stopped on host a, nothing recorded, no pin.
 * - Host b's room taken while the disk is on its way: the rehome re-checks b's memory and CPU and refuses, the start
 *   answers 503 with the machine still stopped on host a, and the sweeps leave nothing behind.
 * - A start's move cut short after its rehome (a killed process): the machine reads stopped on host b with its disk
 *   there; the next start, on host b's driver, continues the move (not a plain start), so it finishes and the sweeps
 *   leave no pin and no old disk.
 * Needs root (mounts).
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createMachineMove } from '../../../control-plane/src/cluster/machine-move.js';
import { START_MOVE_STEPS } from '../../../control-plane/src/domain/drain.js';
import { createDrain } from '../../../control-plane/src/services/drain.js';
import type { MachineMove } from '../../../control-plane/src/services/machine-move.js';
import { DiskSubstrate, HOST_A, HOST_B, serviceHosts, type ChannelHost } from '../../helpers/layer-channel.js';
import { onDisk } from '../../helpers/layer-hosts.js';
import { startPostgres } from '../../helpers/postgres.js';

const GIB = 1024 ** 3;
/** A host of `gib` GiB of memory: 5 holds one small machine (4096 of 0.9 × 5120 MiB), 10 two, 25 five. */
const shape = (gib: number) => ({ cores: 16, memory_bytes: gib * GIB, disk_bytes: 1000 * GIB, machines: { small: 4 } });
const NOTE = 'written on host a before it stopped\n';
const BLOB = Buffer.alloc(2 * 1024 * 1024, 7);
const FULL = 'No host has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.';

const pgServer = startPostgres();
t.teardown(async () => (await pgServer).stop());

async function twoHosts(t: Test, db: string, o: { gibA: number; gibB: number; wrapA?: (real: MachineMove) => MachineMove }) {
  const url = await (await pgServer).createDatabase(db);
  const { root, a, b, callsA, ownersA, subA, subB, rigA, rigB } = await serviceHosts(t, url, {
    capacity: { a: shape(o.gibA), b: shape(o.gibB) },
    moves: o.wrapA ? { wrapA: o.wrapA } : {},
  });
  const { key } = await rigA.tenant('pro', ['machines:read', 'machines:write', 'machines:control']);
  const mnt = path.join(root, 'mnt');

  /** A machine on host a with NOTE and BLOB on its disk, stopped. */
  async function stoppedOnA(): Promise<string> {
    const m = await rigA.call('POST', '/v1/machines', { key, body: { name: 'sleeper' } });
    t.same([m.status, m.json.state], [201, 'running'], m.text);
    const id = m.json.id as string;
    t.equal((await rigA.store.machines.byId(id))?.host_id, HOST_A, 'made on host a');
    await onDisk(a.store, DiskSubstrate.diskOf(id), mnt, (dir) => {
      fs.mkdirSync(path.join(dir, 'home'));
      fs.writeFileSync(path.join(dir, 'home', 'note.txt'), NOTE);
      fs.writeFileSync(path.join(dir, 'home', 'blob.bin'), BLOB);
    });
    const stop = await rigA.call('POST', `/v1/machines/${id}/stop`, { key });
    t.same([stop.status, stop.json.state], [200, 'stopped'], stop.text);
    return id;
  }
  /** A running machine made by `rig`'s process on its host (taking its room). */
  const filler = async (rig: typeof rigA, name: string) => {
    const m = await rig.call('POST', '/v1/machines', { key, body: { name } });
    t.same([m.status, m.json.state], [201, 'running'], m.text);
    return m.json.id as string;
  };
  const filesOn = (h: ChannelHost, id: string) =>
    onDisk(h.store, DiskSubstrate.diskOf(id), mnt, (dir) => [fs.readFileSync(path.join(dir, 'home', 'note.txt'), 'utf8'), fs.readFileSync(path.join(dir, 'home', 'blob.bin')).equals(BLOB)]);
  const movePins = (h: ChannelHost) => h.store.pins().filter((p) => p.holder.startsWith('move_')).map((p) => p.holder);
  const hasDisk = (h: ChannelHost, id: string) => h.store.disks().some((d) => d.id === DiskSubstrate.diskOf(id));
  const exports = () => a.logs.filter((l) => l.event === 'layer_export').length;
  const row = async (id: string) => {
    const m = await rigA.store.machines.byId(id);
    return [m?.host_id, m?.state];
  };
  const moveRecords = async (id: string) => (await rigA.store.drain.records(id)).map((r) => r.type);
  /** Host a's process's seam, as its services have it. */
  const seamA = createMachineMove({ calls: callsA, ownerOfHost: ownersA, local: rigA.services.moveActs, transfer: true });
  return { a, b, subA, subB, rigA, rigB, key, seamA, stoppedOnA, filler, filesOn, movePins, hasDisk, exports, row, moveRecords };
}

t.test('host a full: the start moves the machine to host b and runs it there with its file; nothing left behind', async (t) => {
  const { a, b, subA, subB, rigA, rigB, key, stoppedOnA, filler, filesOn, movePins, hasDisk, exports, row, moveRecords } = await twoHosts(t, 'start_elsewhere_full', { gibA: 5, gibB: 25 });
  const id = await stoppedOnA();
  await filler(rigA, 'takes-a');

  // Asked of host a's process: the driver of the machine's host (owner-route.ts forwards every machine route there).
  const start = await rigA.call('POST', `/v1/machines/${id}/start`, { key });
  t.same([start.status, start.json.state], [200, 'running'], start.text);
  t.same(await row(id), [HOST_B, 'running'], 'recorded running on host b');
  t.same([await subB.status(id), await subA.status(id)], ['running', 'stopped'], "host b's substrate runs it; host a's old disk is stopped");
  t.same(await filesOn(b, id), [NOTE, true], "host b's disk holds the file, byte for byte");
  t.equal(exports(), 1, 'the disk moved once');
  t.same(await moveRecords(id), [
    'drain.planned', 'drain.step', 'drain.step', 'drain.step', 'drain.step', 'drain.step', 'drain.step', 'drain.step', 'drain.step', 'drain.step', 'drain.finished',
  ], 'planned, then capture, pull, make_disk begun and done, rehome done, start begun and done, finished');
  const planned = (await rigA.store.drain.records(id))[0];
  t.same(planned?.type === 'drain.planned' ? [planned.from, planned.to, planned.why, planned.steps] : planned, [HOST_A, HOST_B, 'start', ['capture', 'pull', 'make_disk', 'rehome', 'start']]);

  const events = await rigB.call('GET', `/v1/machines/${id}/events?limit=100`, { key });
  const started = (events.json.data as Array<{ type: string; data: Record<string, unknown> }>).find((e) => e.type === 'machine.started' && e.data.from === 'stopped');
  t.same([started?.data.from, started?.data.to, started?.data.reason, (started?.data.by as { type?: string } | undefined)?.type], ['stopped', 'running', 'moved_to_another_host', 'api_key'], 'the tenant sees its start, and why it took longer');
  t.notMatch(events.text + start.text, /host_[a-z]|move_mch|drain\./, 'no host id, pin or move record in what the tenant reads');

  t.same([hasDisk(a, id), movePins(a).length], [true, 1], "before host a's reconcile: its old disk and the capture's pin");
  await rigA.services.machines.reconcile();
  t.same([hasDisk(a, id), movePins(a)], [false, []], "after it: host a's old disk destroyed, its pin gone");
  t.same(await rigB.services.machines.sweepMoves(), { destroyed: [], released: 1 }, "host b's sweep lets the pulled chain's pin go");
  t.same([movePins(b), hasDisk(b, id), await subB.status(id)], [[], true, 'running'], "host b's disk stays, running");
});

t.test('host a with room: started on host a, nothing moves', async (t) => {
  const { b, subA, rigA, key, stoppedOnA, movePins, exports, row, moveRecords, hasDisk } = await twoHosts(t, 'start_elsewhere_room', { gibA: 10, gibB: 25 });
  const id = await stoppedOnA();
  await filler(rigA);
  const start = await rigA.call('POST', `/v1/machines/${id}/start`, { key });
  t.same([start.status, start.json.state], [200, 'running'], start.text);
  t.same([await row(id), await subA.status(id)], [[HOST_A, 'running'], 'running'], 'running on host a');
  t.same([exports(), hasDisk(b, id), movePins(b), await moveRecords(id)], [0, false, [], []], 'nothing exported, nothing on host b, no move recorded');

  async function filler(rig: typeof rigA) {
    const m = await rig.call('POST', '/v1/machines', { key, body: { name: 'neighbour' } });
    t.same([m.status, m.json.state], [201, 'running'], m.text);
  }
});

t.test('no host with room: 503 naming capacity, the machine stopped on host a, nothing recorded', async (t) => {
  const { a, b, rigA, rigB, key, stoppedOnA, filler, movePins, exports, row, moveRecords, hasDisk } = await twoHosts(t, 'start_elsewhere_none', { gibA: 5, gibB: 5 });
  const id = await stoppedOnA();
  await filler(rigA, 'takes-a');
  await filler(rigB, 'takes-b');
  const start = await rigA.call('POST', `/v1/machines/${id}/start`, { key });
  t.same([start.status, start.json.error?.code, start.json.error?.message, start.headers.get('retry-after')], [503, 'compute_unavailable', FULL, '30'], start.text);
  t.same(await row(id), [HOST_A, 'stopped'], 'still stopped on host a');
  t.same([exports(), hasDisk(b, id), movePins(a), movePins(b), await moveRecords(id)], [0, false, [], [], []], 'nothing moved, pinned or recorded');
});

t.test("host b's room taken while the disk is on its way: the rehome refuses, the machine stays stopped on host a, nothing left", async (t) => {
  let rigB: Awaited<ReturnType<typeof twoHosts>>['rigB'] | null = null;
  let key = '';
  // After the pull onto host b, before its disk is made and the row rehomed: another machine takes b's last room.
  const wrapA = (real: MachineMove): MachineMove => ({
    ...real,
    ready: () => real.ready(),
    pull: async (m, chain, from, to) => {
      const got = await real.pull(m, chain, from, to);
      const taken = await rigB!.call('POST', '/v1/machines', { key, body: { name: 'takes-b' } });
      t.equal(taken.status, 201, taken.text);
      return got;
    },
  });
  const h = await twoHosts(t, 'start_elsewhere_raced', { gibA: 5, gibB: 5, wrapA });
  rigB = h.rigB;
  key = h.key;
  const id = await h.stoppedOnA();
  await h.filler(h.rigA, 'takes-a');
  const start = await h.rigA.call('POST', `/v1/machines/${id}/start`, { key });
  t.same([start.status, start.json.error?.code, start.json.error?.message], [503, 'compute_unavailable', 'The machine could not be moved to a host with room to start it; it is still stopped. Retry later.'], start.text);
  t.same(await h.row(id), [HOST_A, 'stopped'], 'still stopped on host a: never rehomed onto a host without room');
  const records = await h.rigA.store.drain.records(id);
  t.same(records.slice(-2).map((r) => (r.type === 'drain.failed' ? [r.type, r.step, r.code] : [r.type])), [['drain.failed', 'rehome', 'compute_unavailable'], ['drain.finished']], 'the rehome refused, the move closed');
  t.same(await h.rigB.services.machines.sweepMoves(), { destroyed: [id], released: 1 }, "host b's sweep destroys the disk made there and lets the pin go");
  t.same(await h.rigA.services.machines.sweepMoves(), { destroyed: [], released: 1 }, "host a's sweep lets the capture's pin go; its disk is the machine's");
  t.same([h.movePins(h.a), h.movePins(h.b), h.hasDisk(h.a, id), h.hasDisk(h.b, id)], [[], [], true, false], 'no pin on either host; the disk only on host a');
});

t.test("a start's move cut short after the rehome: stopped on host b with its disk; the next start there continues the move", async (t) => {
  const { a, b, subB, rigA, rigB, key, seamA, stoppedOnA, filler, filesOn, movePins, hasDisk, row } = await twoHosts(t, 'start_elsewhere_resume', { gibA: 5, gibB: 25 });
  const id = await stoppedOnA();
  await filler(rigA, 'takes-a');
  // What a process killed between the rehome and the start leaves: the start's plan recorded, every step up to the
  // rehome acted and recorded done, nothing more (the drain's continueMove stopped before its fifth step).
  const m = (await rigA.store.machines.byId(id))!;
  const plan = { type: 'drain.planned' as const, from: HOST_A, to: HOST_B, was: 'stopped' as const, steps: [...START_MOVE_STEPS], why: 'start' as const };
  t.ok(await rigA.store.drain.append(m, await rigA.store.drain.newestSeq(id), plan, new Date().toISOString()), 'planned');
  const s = rigA.services;
  let asked = 0;
  await createDrain({ store: s.store, events: s.events, leases: s.leases, now: s.now, move: seamA }).continueMove(id, () => ++asked === 5);
  t.same([await row(id), await subB.status(id)], [[HOST_B, 'stopped'], 'stopped'], 'honest: stopped on host b, its disk there');
  t.equal((await rigB.call('GET', `/v1/machines/${id}`, { key })).json.state, 'stopped', 'the tenant reads stopped');

  // The next start reaches host b's driver (the row's host): it continues the open move rather than a plain start.
  const start = await rigB.call('POST', `/v1/machines/${id}/start`, { key });
  t.same([start.status, start.json.state], [200, 'running'], start.text);
  t.same([await row(id), await subB.status(id)], [[HOST_B, 'running'], 'running'], 'running on host b');
  t.same(await filesOn(b, id), [NOTE, true], 'with its file');
  t.equal((await rigA.store.drain.records(id)).at(-1)?.type, 'drain.finished', 'the move finished');
  await rigA.services.machines.reconcile();
  t.same(await rigB.services.machines.sweepMoves(), { destroyed: [], released: 1 }, "host b's sweep lets the pulled chain's pin go");
  t.same([hasDisk(a, id), movePins(a), movePins(b)], [false, [], []], "host a's old disk destroyed; no pin on either host");
});

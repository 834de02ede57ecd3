/**
 * The drain's real move (issue 25 item 6; cluster/machine-move.ts, internal-moves.ts, services/move-acts.ts,
 * services/move-sweep.ts): two service stacks on one throwaway PostgreSQL, each host its own real btrfs layer store
 * and internal listener serving the layer and move routes (the host router), compute faked (test/helpers/layer-channel.ts).
 * The leader is host a's process: a's steps (stop, capture) are its own acts, b's (pull, make disk, start) host calls.
 *
 * - A running machine and a stopped one on host a, each with a file on its disk; host a `draining`; the drain
 *   (services/drain.ts) with the real move, every method called twice in a row → both machines on host b, the
 *   running one running, the stopped one stopped, each file on b's disk byte for byte; the second call of each step
 *   answered the same and acted nothing (one capture, one export, one disk made, one start); host b ran its boot path
 *   (the boot listeners that deliver secrets) once for the running one.
 * - Host a's reconcile then destroys the disks it still held of them and lets the moves' pins go; host b's sweep lets
 *   its pins go and its disks stay whole.
 * - Host b's move routes: a tenant's signed request never reaches them, an unsigned one is 401, a body with an
 *   unknown field 400 with nothing done. Needs root (mounts).
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { AppError } from '../../../shared/errors.js';
import { createHostCalls } from '../../../control-plane/src/cluster/forward/host-call.js';
import { signRequest } from '../../../control-plane/src/cluster/forward/signature.js';
import { createMachineMove } from '../../../control-plane/src/cluster/machine-move.js';
import { createDrain } from '../../../control-plane/src/services/drain.js';
import type { MachineMove } from '../../../control-plane/src/services/machine-move.js';
import { call, KEY, TENANT } from '../../helpers/forward-rig.js';
import { DiskSubstrate, HOST_A, HOST_B, PROC_A, PROC_B, serviceHosts } from '../../helpers/layer-channel.js';
import { onDisk } from '../../helpers/layer-hosts.js';
import { startPostgres } from '../../helpers/postgres.js';

const CAPACITY = { cores: 2, memory_bytes: 25769803776, disk_bytes: 107374182400, machines: { small: 4 } };
const BLOB = Buffer.alloc(2 * 1024 * 1024, 9);

/**
 * `move` with every method called twice in a row; what each pair answered is noted in `answers`. `meanwhile` runs
 * before each start (the move still open, the machine already on its new host).
 */
function twice(move: MachineMove, answers: string[], meanwhile: () => Promise<void>): MachineMove {
  return {
    ready: () => move.ready(),
    async stop(m, from) {
      await move.stop(m, from);
      await move.stop(m, from);
    },
    async capture(m, from) {
      const [x, y] = [await move.capture(m, from), await move.capture(m, from)];
      answers.push(`capture ${m.id}: ${x.chain === y.chain ? 'same chain' : 'two chains'}`);
      return y;
    },
    async pull(m, chain, from, to) {
      const [x, y] = [await move.pull(m, chain, from, to), await move.pull(m, chain, from, to)];
      answers.push(`pull ${m.id}: ${x.bytes > 0 ? 'moved' : 'nothing'}, then ${y.bytes}`);
      return x;
    },
    async makeDisk(m, chain, to) {
      await move.makeDisk(m, chain, to);
      await move.makeDisk(m, chain, to);
    },
    async start(m, to) {
      await meanwhile();
      await move.start(m, to);
      await move.start(m, to);
    },
  };
}

const pgServer = startPostgres();
t.teardown(async () => (await pgServer).stop());

/**
 * Two hosts' stacks on a fresh database: each pulls layers from the other's driver (found through the hosts table) and
 * serves the move routes; `move` is the real seam as host a's process (the leader) runs it.
 */
async function twoHosts(t: Test, db: string) {
  const url = await (await pgServer).createDatabase(db);
  const { root, a, b, callsA, subA, subB, rigA, rigB, ownersA } = await serviceHosts(t, url, { capacity: { a: CAPACITY, b: CAPACITY } });
  const move = createMachineMove({ calls: callsA, ownerOfHost: ownersA, local: rigA.services.moveActs, transfer: true });
  const { key } = await rigA.tenant('pro', ['machines:read', 'machines:write', 'machines:control']);
  /** The leader's drain of host a with `m`, pass after pass until host a holds no machine. */
  const drainA = async (m: MachineMove = move) => {
    t.equal((await rigA.store.hosts.operate(HOST_A, 'drain')).ok, true);
    const s = rigA.services;
    const drain = createDrain({ store: s.store, events: s.events, leases: s.leases, now: s.now, move: m });
    for (let pass = 0; pass < 10 && (await rigA.store.machines.onHost(HOST_A)).length > 0; pass++) await drain.tick();
  };
  return { mnt: path.join(root, 'mnt'), a, b, callsA, subA, subB, rigA, rigB, move, key, drainA };
}

t.test('drain host a with the real move: both machines on host b with their files, host a left empty', async (t) => {
  const { mnt, a, b, callsA, subA, subB, rigA, rigB, move, key, drainA } = await twoHosts(t, 'machine_move');

  // On host a: a running machine and a stopped one, each with files on its disk.
  const running = await rigA.call('POST', '/v1/machines', { key, body: { name: 'runner' } });
  const stopped = await rigA.call('POST', '/v1/machines', { key, body: { name: 'rester', start: false } });
  t.same([running.status, running.json.state, stopped.status, stopped.json.state], [201, 'running', 201, 'stopped'], 'one running, one stopped');
  const ids = [running.json.id as string, stopped.json.id as string];
  for (const id of ids) {
    await onDisk(a.store, DiskSubstrate.diskOf(id), mnt, (dir) => {
      fs.mkdirSync(path.join(dir, 'home'));
      fs.writeFileSync(path.join(dir, 'home', 'note.txt'), `written on host a by ${id}\n`);
      fs.writeFileSync(path.join(dir, 'home', 'blob.bin'), BLOB);
    });
  }
  t.same((await rigA.store.machines.onHost(HOST_A)).map((m) => m.id).sort(), [...ids].sort(), 'both recorded on host a');

  const bootsB: string[] = [];
  rigB.services.machines.onBoot((m) => bootsB.push(m.id));
  // Host a draining; the leader (host a's process) drives the drain with the real move, each step asked twice.
  const answers: string[] = [];
  // Host a's sweep while the move is open (the row already on host b): it must leave the disk and the pin alone.
  const openSweeps: unknown[] = [];
  const meanwhile = async () => void openSweeps.push(await rigA.services.machines.sweepMoves());
  await drainA(twice(move, answers, meanwhile));

  t.same(await rigA.store.machines.onHost(HOST_A), [], 'host a holds no machine');
  t.same(openSweeps, [{ destroyed: [], released: 0 }], "host a's sweep during the running one's open move touched nothing");
  const after = await Promise.all(ids.map((id) => rigA.store.machines.byId(id)));
  t.same(after.map((m) => [m?.host_id, m?.state]), [[HOST_B, 'running'], [HOST_B, 'stopped']], 'both on host b, each in the state it had');
  t.same([await subB.status(ids[0]!), await subB.status(ids[1]!)], ['running', 'stopped'], "host b's substrate runs the running one");
  t.same(answers, [
    `capture ${ids[0]}: same chain`, `pull ${ids[0]}: moved, then 0`,
    `capture ${ids[1]}: same chain`, `pull ${ids[1]}: moved, then 0`,
  ], 'a second capture answers the same layer, a second pull moves nothing');
  await rigB.services.moveActs.booting(ids[0]!);
  t.same(bootsB, [ids[0]], "host b ran the boot path (secrets, ready probe) once, for the running one, once it was recorded running");
  const acts = (sub: DiskSubstrate, id: string) => sub.calls.filter((c) => c.endsWith(`:${id}`) && /^(create|start|stop|destroy):/.test(c)).map((c) => c.split(':')[0]);
  t.same(ids.map((id) => acts(subB, id)), [['create', 'start'], ['create']], 'on host b: each disk made once, the running one started once');
  t.same(ids.map((id) => acts(subA, id)), [['create', 'start', 'stop'], ['create']], 'on host a: the running one (created started) stopped once');
  t.equal(a.logs.filter((l) => l.event === 'layer_export').length, 2, 'one export per machine');
  for (const id of ids) {
    await onDisk(b.store, DiskSubstrate.diskOf(id), mnt, (dir) => {
      t.equal(fs.readFileSync(path.join(dir, 'home', 'note.txt'), 'utf8'), `written on host a by ${id}\n`, "the file is on host b's disk");
      t.ok(fs.readFileSync(path.join(dir, 'home', 'blob.bin')).equals(BLOB), 'and the 2 MiB one, byte for byte');
    });
  }
  const tenantSees = (await rigA.call('GET', `/v1/machines/${ids[0]}/events?limit=100`, { key })).text;
  t.notMatch(tenantSees, /host_[a-z]/, 'no host id in what the tenant reads');

  // What the moves left: host a still holds both old disks and the captures' pins until its reconcile.
  // A move's pins are named by the machine and the move (its plan's seq): the machine's part is compared here.
  const movePins = (h: typeof a) => h.store.pins().filter((p) => /^move_mch_[0-9a-z]+_[0-9]+$/.test(p.holder)).map((p) => p.holder.replace(/_[0-9]+$/, '')).sort();
  const disksOf = (h: typeof a) => h.store.disks().map((d) => d.id).filter((d) => ids.some((id) => d === DiskSubstrate.diskOf(id))).sort();
  const both = ids.map((id) => DiskSubstrate.diskOf(id)).sort();
  t.same([disksOf(a), movePins(a)], [both, ids.map((id) => `move_${id}`).sort()], 'before its reconcile, host a holds the old disks and pins');
  await rigA.services.machines.reconcile();
  t.same([disksOf(a), movePins(a)], [[], []], 'after it, host a holds no disk of them and no move pin');
  t.same(ids.map((id) => acts(subA, id).slice(-1)), [['destroy'], ['destroy']], 'each destroyed on host a');
  t.same(await rigA.store.machines.onHost(HOST_A), [], 'and no row moved back');
  t.same([movePins(b), disksOf(b)], [ids.map((id) => `move_${id}`).sort(), both], 'host b pins the pulled chains until its sweep');
  t.same(await rigB.services.machines.sweepMoves(), { destroyed: [], released: 2 }, "host b's sweep releases its two pins, destroys nothing");
  t.same([movePins(b), disksOf(b)], [[], both], "host b's disks stay");
  await onDisk(b.store, DiskSubstrate.diskOf(ids[1]!), mnt, (dir) => t.ok(fs.readFileSync(path.join(dir, 'home', 'blob.bin')).equals(BLOB), 'whole after the pins went'));
  t.same(await rigA.services.machines.sweepMoves(), { destroyed: [], released: 0 }, 'a second sweep on host a finds nothing');

  // Host b's move routes: only host calls reach them, and a body not of the step's shape does nothing.
  const port = Number(new URL(b.address).port);
  const startPath = `/internal/moves/${ids[1]}/start`;
  const host = { on_behalf_of: { kind: 'host' as const, host_id: HOST_A }, request_id: 'req_h1' };
  const signed = (assertion: typeof TENANT | typeof host, p: string) => signRequest(KEY, { method: 'POST', path: p, sender: PROC_A, target: PROC_B, assertion, now: Date.now() });
  const unsigned = await call(port, { method: 'POST', path: startPath, body: '{}' });
  t.equal(unsigned.status, 401, 'unsigned: 401');
  const tenant = await call(port, { method: 'POST', path: startPath, headers: { ...signed(TENANT, startPath), 'content-type': 'application/json' }, body: '{}' });
  t.same([tenant.status, b.tenantServed.map((x) => x.url)], [299, [startPath]], "a tenant's signed request goes to the tenant handlers, never the move routes");
  const extra = await call(port, { method: 'POST', path: startPath, headers: { ...signed(host, startPath), 'content-type': 'application/json' }, body: '{"now":true}' });
  t.same([extra.status, (JSON.parse(extra.body.toString()) as { error: { code: string } }).error.code], [400, 'invalid_request'], 'an unknown field: 400');
  t.same([await subB.status(ids[1]!), b.logs.filter((l) => l.event === 'move_step' && l.machine === ids[1] && l.step === 'start').length], ['stopped', 0], 'nothing started');

  // The calling side's bounds: a body over 16 KiB is never sent; an answer not of the expected shape is garbled.
  const ownerB = { kind: 'remote' as const, processId: PROC_B, address: b.address };
  const stepsSeen = () => b.logs.filter((l) => l.event === 'move_step').length;
  const seenBefore = stepsSeen();
  const big = await callsA.postJson(ownerB, startPath, { pad: 'x'.repeat(17 * 1024) }, z.strictObject({})).catch((e: unknown) => e);
  t.same(big instanceof AppError ? [big.code, big.message] : big, ['invalid_request', "A host-to-host call's body is larger than 16384 bytes."], 'a body over the bound: refused before sending');
  const stopPath = `/internal/moves/${ids[1]}/stop`;
  const garbled = await callsA.postJson(ownerB, stopPath, {}, z.strictObject({ chain: z.string() })).catch((e: unknown) => e);
  t.same(garbled instanceof AppError ? [garbled.code, garbled.status] : garbled, ['compute_unavailable', 503], 'an answer not of the schema: 503 garbled');
  t.equal(stepsSeen(), seenBefore + 1, 'only the stop reached host b (a stopped machine: nothing done)');
});

t.test('a move back onto a host still holding its old disk and pin makes the disk from a fresh capture', async (t) => {
  const { mnt, a, b, rigA, rigB, key, drainA } = await twoHosts(t, 'machine_move_back');
  const made = await rigA.call('POST', '/v1/machines', { key, body: { name: 'traveller', start: false } });
  t.equal(made.status, 201, made.text);
  const id = made.json.id as string;
  const disk = DiskSubstrate.diskOf(id);
  const note = (h: typeof a) => onDisk(h.store, disk, mnt, (dir) => fs.readFileSync(path.join(dir, 'note.txt'), 'utf8'));
  await onDisk(a.store, disk, mnt, (dir) => fs.writeFileSync(path.join(dir, 'note.txt'), 'first, on host a\n'));
  await drainA();
  t.equal((await rigA.store.machines.byId(id))?.host_id, HOST_B, 'moved to host b');
  await onDisk(b.store, disk, mnt, (dir) => fs.writeFileSync(path.join(dir, 'note.txt'), 'then, on host b\n'));
  t.equal(await note(a), 'first, on host a\n', 'host a still holds the old disk (not swept yet), host b the pulled chain\'s pin');

  // Moved back by the hosts' acts, as a later move (another plan) would: captured on b, pulled and made on a.
  const later = 1_000_000;
  const { chain } = await rigB.services.moveActs.capture(id, later);
  t.ok((await rigA.services.moveActs.pull(id, later, HOST_B, chain)).bytes > 0, "b's fresh capture pulled to a");
  await rigA.services.moveActs.makeDisk(id, chain);
  t.equal(await note(a), 'then, on host b\n', "host a's disk is made from b's fresh capture, not the stale disk or the earlier move's layer");
});

t.test('without an internal channel or a layer transfer the move is not ready, with the reason', async (t) => {
  const neverAsked = async (): Promise<never> => {
    throw new Error('no host is asked');
  };
  const acts = { stop: neverAsked, capture: neverAsked, pull: neverAsked, makeDisk: neverAsked, start: neverAsked, forkCapture: neverAsked, forkRelease: neverAsked, booting: async () => undefined };
  const reason = (e: unknown) => (e instanceof AppError ? [e.code, e.message] : e);
  const noChannel = createMachineMove({ calls: null, ownerOfHost: neverAsked, local: acts, transfer: true });
  t.same(reason(await noChannel.ready().catch((e: unknown) => e)), ['compute_unavailable', 'Moving a machine between hosts is not configured here (no internal channel between hosts); the drain waits.']);
  const noTransfer = createMachineMove({ calls: createHostCalls({ open: () => { throw new Error('no host is called'); } }, HOST_A), ownerOfHost: neverAsked, local: acts, transfer: false });
  t.same(reason(await noTransfer.ready().catch((e: unknown) => e)), ['compute_unavailable', 'Moving a machine between hosts is not configured here (no layer transfer between hosts); the drain waits.']);
});

/**
 * A fork of a running machine's disk as it is now, placed on another host (issue 25 items 2 and 4;
 * services/live-fork.ts, services/placement.ts `forkHosts`): two service stacks on one throwaway PostgreSQL, each host
 * its own real btrfs layer store and internal listener serving the layer and move routes (test/helpers/layer-channel.ts;
 * compute faked, disks real). Host b's fork asks host a's driver for the capture over the signed channel
 * (cluster/machine-move.ts `createParentDisk`) and pulls the chain with the services' puller.
 *
 * - Host a full: the fork is ranked to host b, runs there with the parent's file (written while the parent runs), the
 *   parent keeps running on a, a's capture pin is kept by a's pin sweep while the fork is being made and is gone after,
 *   b keeps no pin, one export.
 * - Host a with room: the fork is ranked to a first (nothing to copy) and made there, nothing exported; a region hint
 *   naming host b's region ranks b only, and that fork runs on b with the file.
 * - A fork whose pull fails is `error`, and a's pin is let go; a release that does not arrive leaves the pin to a's
 *   pin sweep, which lets it go once the fork is no longer being made; a capture for such a fork is refused.
 * Needs root (mounts).
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { AppError } from '../../../shared/errors.js';
import { createParentDisk } from '../../../control-plane/src/cluster/machine-move.js';
import type { LayerFetch } from '../../../control-plane/src/services/layer-pull.js';
import type { ParentDisk } from '../../../control-plane/src/services/live-fork.js';
import { hostsFor } from '../../../control-plane/src/services/placement.js';
import { DiskSubstrate, HOST_A, HOST_B, serviceHosts, type ChannelHost, type HostBParts } from '../../helpers/layer-channel.js';
import { onDisk } from '../../helpers/layer-hosts.js';
import { startPostgres } from '../../helpers/postgres.js';

const GIB = 1024 ** 3;
/** A host of `gib` GiB of memory: 5 holds one small machine (4096 of 0.9 × 5120 MiB), 10 two, 25 five. */
const shape = (gib: number) => ({ cores: 16, memory_bytes: gib * GIB, disk_bytes: 1000 * GIB, machines: { small: 4 } });
const NOTE = 'written on host a while the parent runs\n';
const BLOB = Buffer.alloc(2 * 1024 * 1024, 5);

const pgServer = startPostgres();
t.teardown(async () => (await pgServer).stop());

interface Wraps {
  /** Wraps host b's seam to host a (the test watches or breaks a step). */
  parentDisk?: (real: ParentDisk) => ParentDisk;
  /** Wraps host b's layer fetch. */
  fetch?: (real: LayerFetch) => LayerFetch;
}

/** Two hosts' stacks on a fresh database; host b's forks of host a's machines ask host a over host calls. */
async function twoHosts(t: Test, db: string, o: { gibA: number; regionB?: string; wraps?: Wraps }) {
  const url = await (await pgServer).createDatabase(db);
  const servicesB = (b: HostBParts) => {
    const parentDisk = createParentDisk({ calls: b.calls, ownerOfHost: b.ownerOfHost });
    return {
      layerPull: { fetch: o.wraps?.fetch ? o.wraps.fetch(b.fetch) : b.fetch, sink: b.sink },
      parentDisk: o.wraps?.parentDisk ? o.wraps.parentDisk(parentDisk) : parentDisk,
    };
  };
  const { root, a, b, subA, subB, rigA, rigB } = await serviceHosts(t, url, { capacity: { a: shape(o.gibA), b: shape(25) }, ...(o.regionB ? { regionB: o.regionB } : {}), servicesB });
  const { key, orgId } = await rigA.tenant('pro', ['machines:read', 'machines:write', 'machines:control']);
  const mnt = path.join(root, 'mnt');

  /** A running machine on host a with NOTE and BLOB on its disk. */
  async function runningParent(): Promise<string> {
    const m = await rigA.call('POST', '/v1/machines', { key, body: { name: 'parent' } });
    t.same([m.status, m.json.state], [201, 'running'], m.text);
    t.equal((await rigA.store.machines.byId(m.json.id))?.host_id, HOST_A, 'the parent is on host a');
    await onDisk(a.store, DiskSubstrate.diskOf(m.json.id), mnt, (dir) => {
      fs.mkdirSync(path.join(dir, 'home'));
      fs.writeFileSync(path.join(dir, 'home', 'note.txt'), NOTE);
      fs.writeFileSync(path.join(dir, 'home', 'blob.bin'), BLOB);
    });
    return m.json.id as string;
  }
  /** The file and the blob on `id`'s disk on host `h`. */
  const filesOn = (h: ChannelHost, id: string) =>
    onDisk(h.store, DiskSubstrate.diskOf(id), mnt, (dir) => [fs.readFileSync(path.join(dir, 'home', 'note.txt'), 'utf8'), fs.readFileSync(path.join(dir, 'home', 'blob.bin')).equals(BLOB)]);
  /** Live forks' capture pins on a host. */
  const forkPins = (h: ChannelHost) => h.store.pins().filter((p) => p.holder.startsWith('fork_')).map((p) => p.holder);
  const exports = () => a.logs.filter((l) => l.event === 'layer_export').length;
  const ranked = async (machineId: string, region: string | null) => hostsFor(rigA.store, orgId, { kind: 'fork', machineId, snapshotId: null, region });
  return { a, b, subA, subB, rigA, rigB, key, runningParent, filesOn, forkPins, exports, ranked };
}

t.test('host a full: a live fork of a running machine runs on host b with its file; host a keeps no pin', async (t) => {
  const sweptMeanwhile: Array<{ released: number; pins: string[] }> = [];
  let h: Awaited<ReturnType<typeof twoHosts>> | null = null;
  // After host a's capture, before the pull: host a's pin sweep must keep the pin of a fork being made.
  const watch = (real: ParentDisk): ParentDisk => ({
    capture: async (hostId, parent, fork) => {
      const got = await real.capture(hostId, parent, fork);
      sweptMeanwhile.push({ released: await h!.rigA.services.snapshots.sweepPins(), pins: h!.forkPins(h!.a) });
      return got;
    },
    release: (hostId, parent, fork) => real.release(hostId, parent, fork),
  });
  h = await twoHosts(t, 'live_fork_full', { gibA: 5, wraps: { parentDisk: watch } });
  const { a, b, subA, subB, rigA, rigB, key, runningParent, filesOn, forkPins, exports, ranked } = h;
  const parent = await runningParent();

  t.same(await ranked(parent, null), { kind: 'hosts', ranked: [HOST_B] }, 'host a has no room for another: placed on host b');
  // Host b's process serves it (the forward's target, placement-forward.test.ts proves the routing).
  const f = await rigB.call('POST', `/v1/machines/${parent}/fork`, { key, body: { name: 'away' } });
  t.same([f.status, f.json.state], [201, 'running'], f.text);
  const fork = f.json.id as string;
  t.equal((await rigB.store.machines.byId(fork))?.host_id, HOST_B, 'the fork is recorded on host b');
  t.same([await subB.status(fork), await subA.status(fork)], ['running', 'absent'], "host b's substrate runs it; host a holds nothing of it");
  t.same(await filesOn(b, fork), [NOTE, true], "the fork's disk on host b holds the parent's files, byte for byte");
  t.same(sweptMeanwhile, [{ released: 0, pins: [`fork_${fork}`] }], "host a's sweep while the fork was being made kept the capture's pin");
  t.same(forkPins(a), [], "host a's capture pin is gone once the fork's disk is made");
  t.same(b.store.pins().filter((p) => p.holder === fork), [], 'host b keeps no pin of the fork: its disk stands on the layer');
  t.equal(exports(), 1, 'the chain moved once');
  t.same([(await rigA.store.machines.byId(parent))?.state, await subA.status(parent)], ['running', 'running'], 'the parent kept running on host a (a live capture)');
  t.same(subA.calls.filter((c) => c.endsWith(`:${parent}`) && /^(stop|start|create):/.test(c)), [`create:${parent}`, `start:${parent}`], 'never stopped');
  t.notMatch((await rigB.call('GET', `/v1/machines/${fork}/events?limit=100`, { key })).text, /host_[a-z]|fork_mch/, 'no host id or pin in what the tenant reads');
});

t.test('host a with room: the live fork stays on host a (no copy); a region hint naming host b places it there', async (t) => {
  const { a, b, rigA, rigB, key, runningParent, filesOn, forkPins, exports, ranked } = await twoHosts(t, 'live_fork_room', { gibA: 10, regionB: 'rb' });
  const parent = await runningParent();
  t.same(await ranked(parent, null), { kind: 'hosts', ranked: [HOST_A, HOST_B] }, "no hint: any region; host a (room for one more) first though host b has more free memory");
  const near = await rigA.call('POST', `/v1/machines/${parent}/fork`, { key, body: { name: 'near' } });
  t.same([near.status, near.json.state], [201, 'running'], near.text);
  t.equal((await rigA.store.machines.byId(near.json.id))?.host_id, HOST_A, 'made on host a');
  t.same(await filesOn(a, near.json.id), [NOTE, true]);
  t.same([exports(), b.store.disks().length, forkPins(a)], [0, 0, []], 'nothing exported, nothing on host b, no capture pin');

  t.same(await ranked(parent, 'rb'), { kind: 'hosts', ranked: [HOST_B] }, "a hint naming host b's region: host b only");
  const far = await rigB.call('POST', `/v1/machines/${parent}/fork`, { key, body: { name: 'far', region: 'rb' } });
  t.same([far.status, far.json.state, far.json.region], [201, 'running', 'rb'], far.text);
  t.equal((await rigB.store.machines.byId(far.json.id))?.host_id, HOST_B);
  t.same(await filesOn(b, far.json.id), [NOTE, true], "host b's fork holds the file");
  t.same([exports(), forkPins(a)], [1, []], 'moved once; no pin left on host a');
});

t.test('a fork whose pull fails lets host a\'s pin go; a release that never arrives is swept once the fork is made', async (t) => {
  let failPull = true;
  let dropRelease = false;
  const fetch = (real: LayerFetch): LayerFetch => ({
    chain: (hostId, layerId) => real.chain(hostId, layerId),
    body: async (hostId, layerId, have) => {
      if (failPull) throw new AppError('compute_unavailable', 'the stream was cut');
      return real.body(hostId, layerId, have);
    },
  });
  const parentDisk = (real: ParentDisk): ParentDisk => ({
    capture: (hostId, parent, fork) => real.capture(hostId, parent, fork),
    release: async (hostId, parent, fork) => {
      if (dropRelease) throw new AppError('compute_unavailable', 'host a is not reachable');
      return real.release(hostId, parent, fork);
    },
  });
  const { a, rigA, rigB, key, runningParent, forkPins } = await twoHosts(t, 'live_fork_fail', { gibA: 5, wraps: { fetch, parentDisk } });
  const parent = await runningParent();

  const failed = await rigB.call('POST', `/v1/machines/${parent}/fork`, { key, body: { name: 'cut' } });
  t.same([failed.status, failed.json.error.code, failed.json.error.message], [503, 'compute_unavailable', 'The machine could not be forked.'], failed.text);
  const cut = (await rigB.call('GET', '/v1/machines', { key })).json.data.find((m: { name: string }) => m.name === 'cut');
  t.equal(cut?.state, 'error', 'the fork is recorded error, never running');
  t.same(forkPins(a), [], "the failed fork's capture pin on host a was let go");
  const again = await rigA.services.moveActs.forkCapture(parent, cut.id).catch((e: unknown) => e);
  t.same(again instanceof AppError ? [again.code, again.message] : again, ['conflict', 'The fork is no longer being made, so its parent is not captured for it.'], 'a capture for a fork no longer being made is refused');
  t.same(forkPins(a), [], 'and pins nothing');

  failPull = false;
  dropRelease = true;
  const made = await rigB.call('POST', `/v1/machines/${parent}/fork`, { key, body: { name: 'unreleased' } });
  t.same([made.status, made.json.state], [201, 'running'], made.text);
  t.same(forkPins(a), [`fork_${made.json.id}`], 'the release did not arrive: host a still pins the capture');
  t.ok(rigB.failures.includes(`fork_release:${made.json.id}`), "host b's operator log says so");
  t.equal(await rigA.services.snapshots.sweepPins(), 1, "host a's pin sweep releases it: the fork is no longer being made");
  t.same(forkPins(a), [], 'no pin left');
});

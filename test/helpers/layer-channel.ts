/**
 * Two hosts' layer stores (layer-hosts.ts: two btrfs loop volumes under /tmp/layers-*) each behind its own real
 * internal listener (cluster/forward/listener.ts) serving the layer routes (internal-layers.ts) as its host handlers,
 * and host b's side of a pull: a real forwarder, host calls signed with host b's id, `layerFetch` finding host a's
 * listener through the given owner lookup, and the services' puller into b's store. The tenant handlers of each
 * listener record what reaches them (a host call must never). `DiskSubstrate`: a machine host whose disks and layers
 * are a host's real layer store (btrfs) and whose compute is the fake one (no container boots: what is tested is
 * the disks, read back by mounting them). Each listener's host handlers are the host router (internal-host-router.ts):
 * the layer routes, and the move routes once a test plugs a host's move acts in (`serveMoves`, when its services
 * exist); `callsA` are host calls signed by host a's process (a drain's leader running there). `serviceHosts`: the
 * two hosts each with its service stack (machines-rig.ts) on one PostgreSQL database, registered and driven; with
 * `moves`, each host's services move machines between the hosts (a start on a full host: services/start-elsewhere.ts)
 * through the real seam (cluster/machine-move.ts) over its own host calls.
 */
import type { IncomingMessage } from 'node:http';
import type { Test } from 'tap';
import { createForwarder } from '../../control-plane/src/cluster/forward/forwarder.js';
import { createHostCalls } from '../../control-plane/src/cluster/forward/host-call.js';
import { createInternalServer, type Forwarded } from '../../control-plane/src/cluster/forward/listener.js';
import type { Owner } from '../../control-plane/src/cluster/forward/owner.js';
import { layerFetch } from '../../control-plane/src/cluster/layer-fetch.js';
import { layerHostHandlers } from '../../control-plane/src/internal-layers.js';
import { hostRouter, type HostParts } from '../../control-plane/src/internal-host-router.js';
import { moveHostHandlers } from '../../control-plane/src/internal-moves.js';
import type { MoveActs } from '../../control-plane/src/services/move-acts.js';
import type { LogLine } from '../../control-plane/src/log.js';
import type { HostState } from '../../control-plane/src/domain/host-states.js';
import { createLayerPuller } from '../../control-plane/src/services/layer-pull.js';
import { captured, MachineDisks } from '../../control-plane/src/substrate/disks/machine-disks.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import type { CaptureResult, CreateSpec, DiskSource, LayerPin } from '../../control-plane/src/substrate/substrate.js';
import { ownerOfHost, registeredUrl } from '../../control-plane/src/cluster/owner-of.js';
import type { LayerFetch } from '../../control-plane/src/services/layer-pull.js';
import type { ServiceDeps } from '../../control-plane/src/services/index.js';
import type { HostCapacity } from '../../control-plane/src/domain/host-capacity.js';
import type { HostRow } from '../../control-plane/src/store/repos/hosts.js';
import type { HostCalls } from '../../control-plane/src/cluster/forward/host-call.js';
import { createMachineMove } from '../../control-plane/src/cluster/machine-move.js';
import type { MachineMove } from '../../control-plane/src/services/machine-move.js';
import { KEY, closeServer, listenOn } from './forward-rig.js';
import { makeMachinesRig } from './machines-rig.js';
import { layerHosts, type LayerHost } from './layer-hosts.js';

export const HOST_A = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
export const HOST_B = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';
export const PROC_A = 'cp-aaaaaaaaaaaaaaaaaaaaaaaa';
export const PROC_B = 'cp-bbbbbbbbbbbbbbbbbbbbbbbb';

export interface ChannelHost extends LayerHost {
  address: string;
  logs: LogLine[];
  /** What reached this listener's tenant handlers (requests and upgrades). */
  tenantServed: Array<{ url?: string; f: Forwarded }>;
  /** Serve the move routes with `acts` (this host's services' move acts) from now on. */
  serveMoves(acts: MoveActs): void;
}

async function listen(t: Test, h: LayerHost, processId: string): Promise<ChannelHost> {
  const logs: LogLine[] = [];
  const tenantServed: ChannelHost['tenantServed'] = [];
  const tenant = (req: IncomingMessage, f: Forwarded) => tenantServed.push({ url: req.url, f });
  const parts: HostParts = { layers: layerHostHandlers(h.source, { log: (l) => logs.push(l) }), moves: null };
  const server = createInternalServer({
    key: KEY, processId, log: (l) => logs.push(l),
    handlers: {
      request: (req, res, f) => {
        tenant(req, f);
        res.writeHead(299).end('tenant handler');
      },
      upgrade: (req, socket, _head, f) => {
        tenant(req, f);
        socket.destroy();
      },
    },
    hostHandlers: hostRouter(parts),
  });
  const port = await listenOn(server);
  t.teardown(() => closeServer(server));
  const serveMoves = (acts: MoveActs) => void (parts.moves = moveHostHandlers(acts, { log: (l) => logs.push(l) }));
  return Object.assign(h, { address: `http://127.0.0.1:${port}`, logs, tenantServed, serveMoves });
}

export async function layerChannel(t: Test) {
  const hosts = await layerHosts(t, 'btrfs', { prefix: '/tmp/layers-' });
  const a = await listen(t, hosts.a, PROC_A);
  const b = await listen(t, hosts.b, PROC_B);
  const forwarder = createForwarder({ key: KEY, processId: PROC_B, connectTimeoutMs: 2000 });
  t.teardown(() => forwarder.close());
  const calls = createHostCalls(forwarder, HOST_B);
  const forwarderA = createForwarder({ key: KEY, processId: PROC_A, connectTimeoutMs: 2000 });
  t.teardown(() => forwarderA.close());
  const callsA = createHostCalls(forwarderA, HOST_A);
  /** Who serves each host, and each host's state: the test changes them (a host down, unreachable). */
  const owners = new Map<string, Owner>([[HOST_A, { kind: 'remote', processId: PROC_A, address: a.address }], [HOST_B, { kind: 'local' }]]);
  const states = new Map<string, HostState>([[HOST_A, 'active'], [HOST_B, 'active']]);
  const pullLogs: LogLine[] = [];
  const fetch = layerFetch(calls, async (hostId) => {
    const o = owners.get(hostId);
    if (!o) throw new Error('no process serves the host');
    return o;
  });
  const puller = createLayerPuller({
    hostId: HOST_B,
    transfer: { fetch, sink: b.sink },
    layers: { pinLayer: (l, holder) => b.store.pin(l, holder) },
    host: async (id) => {
      const state = states.get(id);
      return state ? { state } : undefined;
    },
    log: (l) => pullLogs.push(l),
  });
  return { ...hosts, a, b, forwarder, calls, callsA, fetch, puller, owners, states, pullLogs };
}

/** Fake compute over a host's real layer store: creates, captures, pins and restores act on btrfs disks. */
export class DiskSubstrate extends FakeSubstrate {
  readonly disks: MachineDisks;

  constructor(readonly host: LayerHost) {
    super();
    this.disks = new MachineDisks(host.store, host.base);
  }

  static diskOf(machineId: string): string {
    return MachineDisks.nameFor(machineId);
  }

  override async create(spec: CreateSpec, opts: { start?: boolean } = {}): Promise<void> {
    await this.disks.make(spec);
    await super.create({ ...spec, source: { kind: 'base' } }, opts);
  }

  override async capture(id: string, holder: string): Promise<CaptureResult> {
    const running = (await this.status(id)) === 'running';
    const diskId = DiskSubstrate.diskOf(id);
    return running ? captured(await this.host.store.copyToLayer(diskId, holder), true) : this.disks.freezeStopped(diskId, holder);
  }

  override async replaceDisk(id: string, source: DiskSource): Promise<void> {
    await this.disks.replace(DiskSubstrate.diskOf(id), source);
  }

  override async destroy(id: string): Promise<void> {
    await this.disks.delete(id, undefined);
    await super.destroy(id);
  }

  override pinLayer(layerId: string, holder: string): Promise<void> {
    return this.disks.pinLayer(layerId, holder);
  }

  override releaseLayer(layerId: string, holder: string): Promise<void> {
    return this.disks.releaseLayer(layerId, holder);
  }

  override layerPins(): Promise<LayerPin[]> {
    return this.disks.layerPins();
  }
}

/** Host b's side of the channel, for what a test plugs into its services. */
export interface HostBParts {
  /** Host calls signed by host b's process. */
  calls: HostCalls;
  /** Who serves a host, as host b's process finds it (the hosts table). */
  ownerOfHost: ReturnType<typeof ownerOfHost>;
  /** Layers host a holds, as host b fetches them, and host b's receiving side. */
  fetch: LayerFetch;
  sink: LayerHost['sink'];
}

/**
 * Hosts a and b (layerChannel) each with its service stack on the database at `url` (DiskSubstrate: real disks,
 * fake compute), registered in the hosts table with `capacity` (and `region`, default `default`), each driven (its
 * fence held), each serving the move routes with its move acts; each pulls layers from the other's driver, found
 * through the hosts table. `servicesB` adds to host b's services.
 */
export async function serviceHosts(
  t: Test,
  url: string,
  o: {
    capacity: { a: HostCapacity; b: HostCapacity };
    regionB?: string;
    servicesB?: (b: HostBParts) => Partial<ServiceDeps>;
    /** Each host's services move machines between the hosts; `wrapA` lets the test watch or break host a's seam. */
    moves?: { wrapA?: (real: MachineMove) => MachineMove };
  },
) {
  const channel = await layerChannel(t);
  const { a, b, forwarder, callsA } = channel;
  const subA = new DiskSubstrate(a);
  const subB = new DiskSubstrate(b);
  let hostRow: (id: string) => Promise<HostRow | undefined> = async () => undefined;
  const lookups = { host: (id: string) => hostRow(id) };
  const ownersA = ownerOfHost(lookups, { processId: PROC_A, driving: () => true });
  const callsB = createHostCalls(forwarder, HOST_B);
  const ownersB = ownerOfHost(lookups, { processId: PROC_B, driving: () => true });
  const fetchB = layerFetch(callsB, ownersB);
  const moveOf = (calls: HostCalls, owners: typeof ownersA) => (local: MoveActs) => createMachineMove({ calls, ownerOfHost: owners, local, transfer: true });
  const wrapA = o.moves?.wrapA ?? ((real: MachineMove) => real);
  const movesA: Partial<ServiceDeps> = o.moves ? { machineMove: (local) => wrapA(moveOf(callsA, ownersA)(local)) } : {};
  const movesB: Partial<ServiceDeps> = o.moves ? { machineMove: moveOf(callsB, ownersB) } : {};
  const rigA = await makeMachinesRig({
    substrate: subA, databaseUrl: url, services: { hostId: HOST_A, readyProbe: false, layerPull: { fetch: layerFetch(callsA, ownersA), sink: a.sink }, ...movesA },
  });
  t.teardown(() => rigA.close());
  hostRow = (id) => rigA.store.hosts.get(id);
  const rigB = await makeMachinesRig({
    substrate: subB, databaseUrl: url,
    services: { hostId: HOST_B, readyProbe: false, layerPull: { fetch: fetchB, sink: b.sink }, ...movesB, ...o.servicesB?.({ calls: callsB, ownerOfHost: ownersB, fetch: fetchB, sink: b.sink }) },
  });
  t.teardown(() => rigB.close());
  const register = async (rig: typeof rigA, id: string, host: ChannelHost, processId: string, capacity: HostCapacity, region: string) => {
    const { epoch } = await rig.store.hosts.takeOver({ id, region, capacity, internalUrl: registeredUrl(host.address, processId) });
    rig.services.hostFence.hold({ hostId: id, epoch });
  };
  await register(rigA, HOST_A, a, PROC_A, o.capacity.a, 'default');
  await register(rigB, HOST_B, b, PROC_B, o.capacity.b, o.regionB ?? 'default');
  a.serveMoves(rigA.services.moveActs);
  b.serveMoves(rigB.services.moveActs);
  return { ...channel, subA, subB, rigA, rigB, ownersA };
}

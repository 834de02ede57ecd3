/**
 * Several control-plane processes on one PostgreSQL (issue 24 item 5; docs/cluster.md, "Wiring"): what `serve`
 * adds when DATABASE_URL is set. Each process gets a random process id, reads the deployment key from the store
 * (created once, in one transaction), opens the internal listener on INTERNAL_HOST:INTERNAL_PORT and competes to
 * drive its host (the DATA_DIR's host id) with the host jobs as the driver's work. The driver registers
 * `http://<INTERNAL_HOST>:<port>/<process id>` on the host's row at each takeover; `routing` sends every machine
 * operation to whoever its host's row names (cluster/owner-of.ts), a create to the driver of the host placement
 * ranks first (services/placement.ts `hostsFor`, the next one if that one refuses), and the listener serves what others forward
 * with the same app, the principal rebuilt from the signed assertion.
 *
 * On SQLite none of this exists: one process, always local, no listener.
 */
import { randomBytes } from 'node:crypto';
import { IncomingMessage, ServerResponse, type Server } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import type { Config } from '../config.js';
import type { CpEnv } from '../context.js';
import { catalogAt, type CatalogVersion } from '../domain/catalog.js';
import { hostCapacity, type HostShape } from '../domain/host-capacity.js';
import { listen } from '../listen.js';
import type { LogSink } from '../log.js';
import { clusterKeysRepo, INTERNAL_CHANNEL_KEY } from '../store/repos/cluster-keys.js';
import type { Store } from '../store/store.js';
import { hostsFor } from '../services/placement.js';
import { createForwarder, type Forwarder } from './forward/forwarder.js';
import type { CallerRule } from './forward/caller.js';
import type { OwnerOf } from './forward/owner.js';
import { DEPLOYMENT_KEY_MIN_BYTES, DeploymentKey } from './forward/key.js';
import { createInternalServer, type Forwarded, type HostHandlers, type InternalHandlers } from './forward/listener.js';
import { createHostCalls, type HostCalls } from './forward/host-call.js';
import { layerFetch } from './layer-fetch.js';
import type { LayerFetch } from '../services/layer-pull.js';
import { firstOutcome } from './leader.js';
import { driveHost, hostDriverLock, type DriverWork, type HostDriver } from './host-driver.js';
import { measureHostShape } from './host-shape.js';
import type { Routing } from './routing.js';
import { ownerCache } from './owner-cache.js';
import { newProcessId, ownerOfFromStore, ownerOfHost, registeredUrl, type OwnerLookups } from './owner-of.js';

/** The API app's fetch (app.ts), with its bindings. */
type Fetch = (req: Request, env: CpEnv['Bindings']) => Response | Promise<Response>;

export interface ClusterOptions {
  /** The process's store (serve's): the cluster reads hosts and machines through it. */
  store: Store;
  databaseUrl: string;
  config: Config;
  log: LogSink;
  catalog?: readonly CatalogVersion[];
  /** This DATA_DIR's host id (cluster/host-id.ts). */
  hostId: string;
  /** The shape registered instead of the measured one (tests size a host). */
  hostShape?: HostShape;
}

export interface Cluster {
  processId: string;
  hostId: string;
  /** What the API routes by (api/middleware/owner-route.ts). */
  routing: Routing;
  /** What the gateway and the preview proxy route by (gateway/forward.ts, previews/forward.ts). */
  forwarding: { ownerOf: OwnerOf; forwarder: Forwarder; caller: CallerRule };
  /**
   * Opens the internal listener serving forwarded requests and upgrades with `handlers` (internal-handlers.ts), then
   * competes to drive the host with `work`; resolves once the first election has an outcome (driving with its work
   * started, or following).
   */
  start(handlers: InternalHandlers, work: DriverWork, hostHandlers?: HostHandlers): Promise<void>;
  /** Host-to-host calls from this process (forward/host-call.ts): the drain's move steps on other hosts. */
  hostCalls: HostCalls;
  /** Layers held on other hosts, asked of their drivers with host-to-host calls (services/layer-pull.ts). */
  layerFetch: LayerFetch;
  /** Whether this process drives its host now. */
  driving(): boolean;
  /** The internal listener's `http://host:port` once started. */
  internalUrl(): string | null;
  /** Stops driving (its work first, then the lock), closes the listener and the forwarder's connections. */
  close(): Promise<void>;
}

/**
 * The API's part of the listener (internal-handlers.ts `api`): the same app, with the verified `Forwarded` as its
 * binding (authenticate reads the principal from it; owner-route never forwards it again).
 */
export function forwardedRequests(fetch: Fetch): InternalHandlers['request'] {
  const arrived = new WeakMap<IncomingMessage, Forwarded>();
  const serve = getRequestListener((req, env) => {
    // The internal listener is HTTP/1.1 (listener.ts): its bindings are always these two.
    const { incoming, outgoing } = env;
    if (!(incoming instanceof IncomingMessage) || !(outgoing instanceof ServerResponse)) throw new TypeError('the internal listener serves HTTP/1.1 only');
    const f = arrived.get(incoming);
    return fetch(req, { incoming, outgoing, ...(f ? { forwarded: f, clientIp: f.client.ip } : {}) });
  });
  return (req, res, f) => {
    arrived.set(req, f);
    void serve(req, res);
  };
}

export async function prepareCluster(o: ClusterOptions): Promise<Cluster> {
  const { config, log, store } = o;
  const processId = newProcessId();
  const hostId = o.hostId;
  const key = new DeploymentKey(await clusterKeysRepo(store.db).getOrCreate(INTERNAL_CHANNEL_KEY, () => randomBytes(DEPLOYMENT_KEY_MIN_BYTES)));
  const { hosts } = store;
  const lookups: OwnerLookups = {
    machineHost: (id) => hosts.ofMachine(id),
    host: (id) => hosts.get(id),
    hostIds: async () => (await hosts.list()).hosts.map((h) => h.id),
  };
  let driver: HostDriver | null = null;
  const self = { processId, driving: () => driver?.fence != null };
  const forwarder = createForwarder({ key, processId, log });
  const routing: Routing = {
    ownerOf: ownerOfFromStore(lookups, self),
    owners: ownerCache({ ttlMs: config.ownerCacheMs }),
    hostId,
    ownerOfHost: ownerOfHost(lookups, self),
    hostsFor: (orgId, choice) => hostsFor(store, orgId, choice, { now: new Date(), ...(o.catalog ? { catalog: o.catalog } : {}) }),
    onDownHost: async (machineId) => (await lookups.machineHost(machineId))?.host?.state === 'down',
    forwarder,
    trustProxy: config.trustProxy,
    publicHost: new URL(config.publicBaseUrl).host,
  };
  // The scheme a caller used is the public base URL's (a TLS proxy in front, or none).
  const caller: CallerRule = { trustProxy: config.trustProxy, proto: new URL(config.publicBaseUrl).protocol === 'https:' ? 'https' : 'http' };
  const forwarding = { ownerOf: routing.ownerOf, forwarder, caller };
  let server: Server | null = null;
  let internalUrl: string | null = null;
  const hostCalls = createHostCalls(forwarder, hostId);

  return {
    processId,
    hostId,
    routing,
    forwarding,
    hostCalls,
    layerFetch: layerFetch(hostCalls, routing.ownerOfHost),
    driving: self.driving,
    internalUrl: () => internalUrl,
    async start(handlers, work, hostHandlers) {
      server = createInternalServer({ key, processId, log, handlers, ...(hostHandlers ? { hostHandlers } : {}) });
      const port = await listen(server, config.internal.port, config.internal.host);
      const h = config.internal.host.includes(':') ? `[${config.internal.host}]` : config.internal.host;
      internalUrl = `http://${h}:${port}`;
      log({ event: 'internal.listening', port });
      const first = firstOutcome(log);
      driver = driveHost({
        hosts,
        registration: {
          id: hostId,
          region: config.region,
          capacity: hostCapacity(o.hostShape ?? measureHostShape(config.dataDir), config.commitRatios, catalogAt(new Date(), o.catalog).sizes),
          internalUrl: registeredUrl(internalUrl, processId),
        },
        connect: hostDriverLock(o.databaseUrl, hostId),
        work: {
          start: async (fence) => {
            await work.start(fence);
            first.started();
          },
          stop: () => work.stop(),
        },
        intervalMs: config.leaderIntervalMs,
        log: first.log,
        onState: first.onState,
      });
      await first.decided;
    },
    async close() {
      await driver?.stop();
      forwarder.close();
      const s = server;
      if (s) {
        await new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeAllConnections();
        });
      }
    },
  };
}

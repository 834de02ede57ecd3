/**
 * Entry point: configuration → database → services → app → HTTP server. Nothing else.
 */
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ALL_OPS } from './api/v1/index.js';
import { createApp } from './app.js';
import { parseConfig, type Config } from './config.js';
import { machineFailureLine, stderrLog, type LogSink } from './log.js';
import { createServices, type ServiceDeps, type Services } from './services/index.js';
import type { MoveActs } from './services/move-acts.js';
import { startEventsFeed } from './cluster/events-feed.js';
import { openStoreDb } from './store/engine/open.js';
import { createStore } from './store/store.js';
import { openKeyring } from './secrets/keyring-file.js';
import { chooseSubstrateKind, DeferredSubstrate, findRepoRoot, prepareSubstrate } from './machine-host.js';
import { ensureHostPackages } from './host-packages.js';
import { probeKvm } from './substrate/vm/kvm-probe.js';
import { attachGateway } from './gateway/gateway.js';
import { gatewayDepsFromServices } from './gateway/from-services.js';
import { createHttpServer } from './http-server.js';
import { forwardFront } from './api/forward-front.js';
import { listen } from './listen.js';
import { previewProxyFromServices } from './previews/from-services.js';
import { createMetrics } from './metrics.js';
import { timedSubstrate, type TimingSink } from './substrate/timed.js';
import { alwaysLeader, postgresLock } from './cluster/leader.js';
import { controlPlaneJobs, hostWork, runJobs, type JobPeriods } from './cluster/jobs.js';
import { substrateJob } from './cluster/substrate-job.js';
import { forwardedRequests, prepareCluster } from './cluster/wiring.js';
import { beginDriving } from './cluster/host-return.js';
import { readOrCreateHostId } from './cluster/host-id.js';
import { internalHandlers } from './internal-handlers.js';
import { layerHostHandlers } from './internal-layers.js';
import { hostRouter } from './internal-host-router.js';
import { moveHostHandlers } from './internal-moves.js';
import { createMachineMove, createParentDisk } from './cluster/machine-move.js';
import { DeferredTransfer } from './substrate/disks/transfer/deferred.js';
import type { HostShape } from './domain/host-capacity.js';

export interface Running {
  url: string;
  /** GET /metrics on its own loopback listener, when METRICS_PORT is set. */
  metricsUrl: string | null;
  port: number;
  /** The dashboard is served at `/` (a build was found or given). */
  dashboard: boolean;
  /** The running services (benchmarks switch metering on and off). */
  services: Services;
  /** Whether this process drives its host's substrate now (always on SQLite; on PostgreSQL, the elected one). */
  driving(): boolean;
  /** The internal listener other processes forward to (`http://host:port`); null on SQLite (none is opened). */
  internalUrl: string | null;
  close(): Promise<void>;
}

/** What a process started without a substrate (identity-only use) registers for its host: room for nothing. */
const NO_SUBSTRATE_SHAPE: HostShape = { cores: 0, memory_bytes: 0, disk_bytes: 0 };

export async function serve(
  config: Config,
  opts: {
    log?: LogSink;
    services?: Partial<ServiceDeps>;
    say?: (line: string) => void;
    dashboardDir?: string | null;
    jobPeriodsMs?: Partial<JobPeriods>;
    /** On PostgreSQL: the shape this host registers instead of the measured one (tests size a host). */
    hostShape?: HostShape;
  } = {},
): Promise<Running> {
  const baseLog = opts.log ?? stderrLog;
  // With METRICS_PORT set, request and failure lines also feed the Prometheus metrics.
  let observe: LogSink | null = null;
  const log: LogSink = (line) => {
    observe?.(line);
    baseLog(line);
  };
  const say = opts.say ?? (() => {});
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  // DATABASE_URL: PostgreSQL (migrated on open, shared with any other control plane on it); else SQLite in DATA_DIR.
  const db = await openStoreDb({ databaseUrl: config.databaseUrl ?? undefined, dataDir: config.dataDir });
  const closeDb = () => db.close().catch(() => undefined);
  // The entry point passes the picked substrate (its image builds in the background); without one,
  // machine operations answer 503 (identity-only use, tests of other areas).
  const given = opts.services?.substrate;
  const deferred = given instanceof DeferredSubstrate ? given : null;
  // With METRICS_PORT set, boots and captures are timed around the substrate calls.
  let onTiming: TimingSink | null = null;
  const substrate = given && config.metricsPort !== null ? timedSubstrate(given, (...a) => onTiming?.(...a)) : given;
  // SECRETS_KEYRING: the default file is created in DATA_DIR on first run, and the operator is told;
  // a keyring gone while the database holds secrets sealed under it stops the start (openKeyring).
  const store = createStore(db);
  let keyring;
  try {
    keyring = opts.services?.keyring !== undefined ? opts.services.keyring : openKeyring(config, say, { sealedSecrets: await store.secrets.countAll() });
  } catch (e) {
    await closeDb();
    throw e;
  }
  if (!keyring) say('secrets: SECRETS_KEYRING=off, storing secrets is refused (501)');
  // On PostgreSQL this DATA_DIR is a host of the deployment (cluster/host-id.ts): new machines are admitted on its
  // registered capacity and recorded on it (services/machines/admission.ts).
  const hostId = config.databaseUrl ? readOrCreateHostId(config.dataDir) : null;
  // On PostgreSQL: the internal channel and this host's driver (cluster/wiring.ts); on SQLite, one process serves all.
  const cluster = config.databaseUrl && hostId
    ? await prepareCluster({ store, databaseUrl: config.databaseUrl, config, log, hostId, catalog: opts.services?.catalog, hostShape: opts.hostShape ?? (substrate ? undefined : NO_SUBSTRATE_SHAPE) })
    : null;
  // Layers between hosts (docs/substrates.md, "Moving disks between hosts"): this host serves its own to the others'
  // drivers and pulls theirs for a fork, restore or template create made here, once its substrate is prepared.
  const transfer = cluster && deferred ? new DeferredTransfer(deferred.transfer) : null;
  // The drain's moves and a start on a full host (services/drain.ts, services/start-elsewhere.ts): each step acted by
  // the driver of the host it is on, over host calls.
  const moveWith = cluster
    ? (local: MoveActs) => createMachineMove({ calls: cluster.hostCalls, ownerOfHost: cluster.routing.ownerOfHost, local, transfer: transfer !== null })
    : undefined;
  const services = await createServices({
    onMachineFailure: (id, op, cause) => log(machineFailureLine(id, op, cause)),
    log,
    hostId,
    // A live fork placed here asks its parent's host (another one) for the parent's disk (services/live-fork.ts).
    ...(moveWith ? { machineMove: moveWith } : {}),
    ...(cluster && transfer ? { layerPull: { fetch: cluster.layerFetch, sink: transfer }, parentDisk: createParentDisk({ calls: cluster.hostCalls, ownerOfHost: cluster.routing.ownerOfHost }) } : {}),
    ...opts.services, keyring, substrate, config, store,
  });
  const dashboardDir = opts.dashboardDir === undefined ? builtDashboard() : opts.dashboardDir;
  const app = createApp({ services, log, ops: ALL_OPS, dashboardDir, routing: cluster?.routing });
  const metrics = config.metricsPort !== null ? createMetrics(services) : null;
  observe = metrics ? metrics.observe : null;
  onTiming = metrics ? (op, seconds, ok) => metrics.observeSubstrate(op, seconds, ok) : null;
  const metricsListener = metrics ? await metrics.listen(config.metricsPort!) : null;
  if (metricsListener) say(`metrics: ${metricsListener.url} (loopback only)`);
  // The background jobs, each run by its role's process (cluster/jobs.ts): on PostgreSQL the deployment-wide ones
  // only in the elected leader and the host's (reconcile, watch, warm pool) only in the host's driver; on SQLite the
  // one process always leads and drives, as before.
  const machineMove = moveWith?.(services.moveActs);
  const jobList = controlPlaneJobs(services, {
    log, resumeMetering: !config.databaseUrl, periodsMs: opts.jobPeriodsMs, substrate: substrate ? substrateJob(services, { ready: deferred?.ready, say, log }) : null,
    ...(machineMove ? { machineMove } : {}),
  });
  const jobs = runJobs(
    jobList,
    config.databaseUrl ? { deployment: postgresLock(config.databaseUrl), host: 'driver' } : { deployment: alwaysLeader },
    { log, intervalMs: config.leaderIntervalMs },
  );
  // Intervals are metered by the leader only (metering job); until this process leads, its flushes carry its egress.
  await jobs.ready;

  // On PostgreSQL, events other processes record wake this process's live subscribers (cluster/events-feed.ts).
  const eventsFeed = config.databaseUrl ? await startEventsFeed({ databaseUrl: config.databaseUrl, store, events: services.events, log }) : null;

  // One listener: the API, the WebSocket gateway (sharing the agent pool's one HTTP/2 session per
  // machine) and the preview hostnames, which reach published ports through the same sessions. With several
  // processes, channels and previews of machines another process drives are forwarded to it (docs/cluster.md).
  const forwarding = cluster?.forwarding;
  const gw = gatewayDepsFromServices(services, { log, forwarding });
  const previews = previewProxyFromServices(services, { egress: gw.egress, log, forwarding });
  // The short way in for a machine operation whose driver this process remembers (api/forward-front.ts).
  const front = cluster ? forwardFront({ routing: cluster.routing, ops: ALL_OPS, principalFromApiKey: (k) => services.identity.principalFromApiKey(k), log }) : null;
  const server = createHttpServer(app.fetch, previews, { hostname: config.host, front });
  await listen(server, config.port, config.host);
  const gateway = attachGateway(server, gw.deps, { skip: (req) => previews?.owns(req) ?? false });
  // The internal listener serves what other processes forward here (internal-handlers.ts), then this process
  // competes to drive its host: at each takeover it holds the new fence and settles a past loss of the host
  // (cluster/host-return.ts) before the host's jobs (reconcile, substrate watch, warm pool) start.
  const hostJobs = hostWork(jobList, log);
  await cluster?.start(internalHandlers({ api: forwardedRequests(app.fetch), gateway, previews, log }), {
    start: async (fence) => {
      await beginDriving(services, fence, log);
      await hostJobs.start(fence);
    },
    stop: () => hostJobs.stop(),
  }, hostRouter({ layers: transfer ? layerHostHandlers(transfer, { log }) : null, moves: moveHostHandlers(services.moveActs, { log }) }));
  const port = (server.address() as AddressInfo).port;
  if (!previews) say('published ports are off: set PREVIEW_DOMAIN to a wildcard name (docs/api-ports.md)');
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  log({ event: 'listening', port });
  return {
    url: `http://${host}:${port}`,
    port,
    services,
    dashboard: !!dashboardDir,
    metricsUrl: metricsListener?.url ?? null,
    driving: () => cluster?.driving() ?? true,
    internalUrl: cluster?.internalUrl() ?? null,
    close: async () => {
      await metricsListener?.close();
      // The host's work stops and its lock goes before the deployment's jobs (the warm pool drains there).
      await cluster?.close();
      // The elected jobs stop first (on SQLite the substrate's warm pool drains here: started-but-unassigned machines
      // are not kept across runs, the next run's image may differ), then the lock goes, then the per-process jobs.
      await jobs.stop();
      await gateway.close();
      await eventsFeed?.stop();
      gw.close();
      previews?.close();
      await services.metering.flush({ notify: false }).catch((e: unknown) => log({ event: 'metering_flush_failed', cause: (e as Error)?.name ?? 'Error' }));
      await new Promise<void>((resolve) => {
        void services.pool.close();
        server.close(() => {
          void closeDb().then(() => resolve());
        });
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = parseConfig(process.env);
  const say = (line: string) => process.stdout.write(`${line}\n`);
  // Up front, before anything listens: the programs the substrate will run (installed as root, else the command).
  const kind = chooseSubstrateKind(config, () => probeKvm().usable);
  try {
    ensureHostPackages({ kind, repoRoot: findRepoRoot(), say });
  } catch (e) {
    process.stderr.write(`computer: ${(e as Error).message}\n`);
    process.exit(1);
  }
  // A start refused for a reason the operator must fix (a lost secrets keyring) is one clear line, not a stack.
  const running = await serve(config, { say, services: { substrate: prepareSubstrate({ config, say }, kind) } }).catch((e: unknown) => {
    process.stderr.write(`computer: refusing to start: ${(e as Error).message}\n`);
    process.exit(1);
  });
  say(gettingStarted(running.url, running.dashboard));
  const stop = () => void running.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

/** dist/dashboard beside this file's dist/control-plane (what `npm start` builds), when it exists. */
function builtDashboard(): string | null {
  const dir = fileURLToPath(new URL('../../dashboard', import.meta.url));
  return fs.existsSync(path.join(dir, 'index.html')) ? dir : null;
}

/** What `npm start` prints once it listens: how to get from nothing to an API key. */
export function gettingStarted(url: string, dashboard = false): string {
  return [
    '',
    `computer is listening on ${url}`,
    ...(dashboard ? ['', `Dashboard: open ${url}/ in a browser and sign up there, or from the command line:`] : []),
    '',
    'Get an API key (details: README.md, "Walkthrough"):',
    `  1. sign up:     curl -s -c jar -H 'content-type: application/json' -d '{"email":"you@example.com","password":"choose a long one"}' ${url}/v1/auth/signup`,
    `  2. subscribe:   curl -s -b jar -H 'content-type: application/json' -H 'origin: ${new URL(url).origin}' -d '{"plan_id":"developer","success_url":"${url}/"}' ${url}/v1/billing/checkout`,
    '                 then open (or curl) the returned url: it starts the 14-day trial',
    `  3. API key:     curl -s -b jar -H 'content-type: application/json' -H 'origin: ${new URL(url).origin}' -d '{"name":"cli","scopes":["machines:read","machines:write","machines:control","sessions:write","secrets:write"]}' ${url}/v1/api-keys`,
    `  4. use it:      curl -s -H "authorization: Bearer sk_..." -H 'content-type: application/json' -d '{}' ${url}/v1/machines`,
    '',
  ].join('\n');
}

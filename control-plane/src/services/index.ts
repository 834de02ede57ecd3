import { createBuiltinProvider, type BuiltinProvider } from '../billing/builtin.js';
import type { BillingProvider } from '../billing/provider.js';
import { createStripeProvider, type StripeClientOptions, type StripeProvider } from '../billing/stripe.js';
import { CATALOG } from '../domain/catalog.js';
import { sha256Hex } from '../auth/tokens.js';
import type { ScryptCost } from '../auth/passwords.js';
import { isRecognisedOrigin, type Config } from '../config.js';
import os from 'node:os';
import path from 'node:path';
import { fileLedger } from './machines/pool-ledger.js';
import type { Resources } from '../domain/capacity.js';
import type { CatalogVersion } from '../domain/catalog.js';
import type { CountedLimitKey } from '../domain/quotas.js';
import type { RateRules } from '../domain/rate-limits.js';
import type { Store } from '../store/store.js';
import type { Substrate } from '../substrate/substrate.js';
import { NO_SUBSTRATE } from '../substrate/unconfigured.js';
import { createEventService } from './events.js';
import { createLeaseService } from './leases.js';
import { createHostFence } from './host-fence.js';
import { createHostHealth } from './host-health.js';
import { createMachineService } from './machines/index.js';
import { createPortService } from './ports.js';
import { createSessionService } from './sessions.js';
import { DiskLocks } from './disk-locks.js';
import { createSnapshotService } from './snapshots.js';
import { createMoveActs, type MoveActs } from './move-acts.js';
import type { MachineMove } from './machine-move.js';
import { createStartElsewhere, type StartElsewhere } from './start-elsewhere.js';
import { DEFAULT_READY_PROBE } from './machines/ready.js';
import type { LayerPullDeps } from './layer-pull.js';
import type { ParentDisk } from './live-fork.js';
import { createTemplateService } from './templates.js';
import { createSecretService } from './secrets.js';
import type { LogSink } from '../log.js';
import { openKeyring, type KeyringSource } from '../secrets/keyring-file.js';
import { createBillingService } from './billing.js';
import { createIdentityService } from './identity.js';
import { createOrganizationService } from './organizations.js';
import { keyCache } from './key-cache.js';
import { createQuotaService, type Counter } from './quotas.js';
import { createRateLimiter } from './rate-limiter.js';
import { createMeteringService } from './metering.js';
import { createUsageService } from './usage.js';
import { createMachineAgent } from './machine-agent/index.js';
import { grantsEntitlements } from '../domain/billing-account.js';

export interface ServiceDeps {
  config: Config;
  store: Store;
  now?: () => Date;
  passwordCost?: ScryptCost;
  catalog?: readonly CatalogVersion[];
  rateRules?: RateRules;
  counters?: Partial<Record<CountedLimitKey, Counter>>;
  /** Replaces the built-in provider (config.billingProvider names which one main.ts builds). */
  billingProvider?: (sink: ReturnType<typeof createBillingService>['sink']) => BillingProvider;
  /** BILLING_PROVIDER=stripe: where the Stripe API is (tests: a loopback fake). */
  stripeClient?: StripeClientOptions;
  /** Where machines run (main.ts picks vm / container / fake). Without one, machine operations answer 503. */
  substrate?: Substrate;
  /** Agent connection deadlines (tests shorten them). */
  agentTimeouts?: { connectMs?: number; requestMs?: number };
  /** Largest agent answer buffered (default agent-client/pool.ts DEFAULT_MAX_RESPONSE, through services/machine-agent; tests lower it). */
  agentMaxAnswerBytes?: number;
  /** Operator log for substrate failures (causes may name host paths, so they never reach the API). */
  onMachineFailure?: (machineId: string, op: string, cause: unknown) => void;
  /** Free disk space kept in reserve under DATA_DIR (services/host-health.ts; default 5%, 256 MiB to 2 GiB). */
  diskReserveBytes?: number;
  /** The host's totals for admission control (default: os.totalmem() and os.cpus()); tests pin them. */
  hostResources?: Resources;
  /**
   * The registered host this process drives (its DATA_DIR's host id, cluster/host-id.ts): admissions lock its row and
   * re-check placement's fit there (services/placement.ts). Absent: no registry (host_id stays null).
   */
  hostId?: string | null;
  /**
   * How a layer another host holds is brought to this one (services/layer-pull.ts): `fetch` over the internal
   * channel (cluster/layer-fetch.ts) and `sink`, the substrate's layer store's receiving side. Absent: nothing moves
   * (one host), and a snapshot recorded on another host is refused (503).
   */
  layerPull?: LayerPullDeps['transfer'];
  /**
   * How a live fork made here asks its parent's host, another one, for the parent's disk (cluster/machine-move.ts
   * `createParentDisk`, with `layerPull` to bring it). Absent: such a fork is refused (503), nothing recorded.
   */
  parentDisk?: ParentDisk;
  /**
   * The drain's seam between hosts (cluster/machine-move.ts `createMachineMove`), made with this host's move acts: a
   * start this host has no room for moves the machine to a host with room and starts it there
   * (services/start-elsewhere.ts). Absent (or no `hostId`): such a start is 503 as before.
   */
  machineMove?: (local: MoveActs) => MachineMove;
  /** How machine.ready is detected (default: poll the agent's /display every second for 3 minutes). */
  readyProbe?: { intervalMs: number; timeoutMs: number } | false;
  /** The secrets keyring (main.ts opens SECRETS_KEYRING; default: opened from config here; null: off). */
  keyring?: KeyringSource | null;
  /** Operator log for background work (secrets delivery); never a value. */
  log?: LogSink;
  /**
   * `server` (default) acts on billing changes (stops machines); the operator CLI passes `cli`: it only
   * records, and the server's periodic enforcement acts on what the CLI changed.
   */
  role?: 'server' | 'cli';
  /** Warm pool timings (tests shorten them); its size is the configuration's WARM_POOL_PER_SIZE. */
  warmPool?: { tickMs?: number; readyTimeoutMs?: number };
  /** Secrets redelivery backoff (tests shorten it). */
  secretsRetry?: { delaysMs: readonly number[]; giveUpMs: number };
}

export async function createServices(d: ServiceDeps) {
  const now = d.now ?? (() => new Date());
  const { store, config } = d;
  const limiter = createRateLimiter(store, now, d.rateRules);
  const billing = createBillingService({
    store, now, providerName: config.billingProvider, catalog: d.catalog,
    isRecognisedOrigin: (o) => isRecognisedOrigin(config, o),
  });
  let builtin: BuiltinProvider | null = null;
  if (d.billingProvider) billing.setProvider(d.billingProvider(billing.sink));
  else if (config.stripe) {
    // Set below, once the usage service it reports from exists.
  } else {
    builtin = createBuiltinProvider({ store, sink: billing.sink, publicBaseUrl: config.publicBaseUrl, now, hash: sha256Hex });
    billing.setProvider(builtin);
  }
  const quotas = createQuotaService({
    billing,
    upgradeUrl: config.upgradeUrl,
    counters: { members: (orgId) => store.identity.countMembers(orgId), ...d.counters },
    lockOrg: (orgId) => store.identity.lockOrg(orgId),
    once: (memo, key, fn) => store.db.once(memo, key, fn),
  });
  const readIdentity = createIdentityService({ store, now, limiter, passwordCost: d.passwordCost, openBillingAccount: (orgId) => billing.open(orgId) });
  // An API key's principal remembered briefly on PostgreSQL (services/key-cache.ts), forgotten at every access change here.
  const keys = keyCache((secret) => readIdentity.principalFromApiKey(secret), { ttlMs: config.authCacheMs });
  const identity: typeof readIdentity = { ...readIdentity, principalFromApiKey: (secret) => keys.principal(secret) };
  const orgs = createOrganizationService({ store, now, quotas, accessChanged: () => keys.forget() });
  const substrate = d.substrate ?? NO_SUBSTRATE;
  const metering = createMeteringService({ store, now, catalog: d.catalog });
  const usage = createUsageService({ store, now, billing, metering });
  let stripe: StripeProvider | null = null;
  if (!d.billingProvider && config.stripe) {
    stripe = createStripeProvider({
      store, sink: billing.sink, settings: config.stripe, now, catalog: d.catalog ?? CATALOG, totals: usage.totals,
      flush: async () => void (await metering.flush()), client: d.stripeClient, log: d.log, background: (d.role ?? 'server') === 'server',
    });
    billing.setProvider(stripe);
  }
  const events = createEventService({ store, now });
  const agent = createMachineAgent({ store, channel: substrate, events, timeouts: d.agentTimeouts, maxAnswerBytes: d.agentMaxAnswerBytes });
  const pool = agent.pool;
  const leases = createLeaseService({ store, events, now });
  const sessions = createSessionService({ store, events, leases, quotas, now });
  const locks = new DiskLocks();
  const hostHealth = createHostHealth({ store, events, dir: config.dataDir, hostId: d.hostId ?? null, ...(d.diskReserveBytes !== undefined ? { reserveBytes: d.diskReserveBytes } : {}) });
  const snapshots = createSnapshotService({
    store, substrate, events, quotas, locks, now, onFailure: d.onMachineFailure, hostHealth, hostId: d.hostId ?? null, layerPull: d.layerPull ?? null,
    ...(d.log ? { log: d.log } : {}),
  });
  const templates = createTemplateService({ store, substrate, quotas, snapshots, now, onFailure: d.onMachineFailure, hostId: d.hostId ?? null });
  // Held by the host driver's work when it takes over (the lead wires it: hostFence.hold(fence)).
  const hostFence = createHostFence();
  // Made below once this host's move acts exist (they need the machines' boot path).
  let elsewhere: StartElsewhere | null = null;
  const machines = createMachineService({
    elsewhere: () => elsewhere,
    hostFence,
    store, substrate, agent, events, leases, sessions, quotas, billing, snapshots, templates, locks, now, catalog: d.catalog, onFailure: d.onMachineFailure, readyProbe: d.readyProbe,
    hostHealth,
    hostId: d.hostId ?? null,
    parentDisk: d.layerPull && d.parentDisk ? d.parentDisk : null,
    network: config.machineNetwork,
    // The vm substrate has no pool (docs/api-machines.md, "Warm starts"); the fake one has one for unit tests.
    warmPool: { perSize: substrate.kind === 'vm' ? 0 : config.warmPoolPerSize, ledger: fileLedger(path.join(config.dataDir, 'warm-pool.json')), ...d.warmPool },
    capacity: {
      host: d.hostResources ?? { memory_mb: Math.floor(os.totalmem() / (1024 * 1024)), vcpu: Math.max(1, os.cpus().length) },
      ratios: config.commitRatios,
    },
  });
  const secrets = createSecretService({
    store, agent, now, quotas, log: d.log, retry: d.secretsRetry,
    keyring: d.keyring === undefined ? openKeyring(config, undefined, { sealedSecrets: await store.secrets.countAll() }) : d.keyring,
  });
  machines.onBoot((m) => secrets.deliverAfterBoot(m));
  // This host's side of a drain's move (the move host routes, internal-moves.ts; cluster/machine-move.ts when local).
  const moveActs = createMoveActs({
    store, substrate, locks, hostId: d.hostId ?? null, bring: snapshots.bring, agent, now, catalog: d.catalog, network: config.machineNetwork,
    readyProbe: d.readyProbe === undefined ? DEFAULT_READY_PROBE : d.readyProbe, booted: machines.booted,
  });
  if (d.machineMove && d.hostId) {
    elsewhere = createStartElsewhere({ store, events, leases, quotas, move: d.machineMove(moveActs), hostId: d.hostId, now, ...(d.catalog ? { catalog: d.catalog } : {}) });
  }
  if (!d.counters?.machines) quotas.registerCounter('machines', (orgId) => store.machines.countLive(orgId));
  if (!d.counters?.running_machines) quotas.registerCounter('running_machines', (orgId) => store.machines.countCompute(orgId));
  if (!d.counters?.snapshots_per_machine) quotas.registerCounter('snapshots_per_machine', (orgId) => store.snapshots.maxPerMachine(orgId));
  if (!d.counters?.templates) quotas.registerCounter('templates', (orgId) => store.templates.count(orgId));
  if (!d.counters?.concurrent_sessions) quotas.registerCounter('concurrent_sessions', (orgId) => store.sessions.countOpen(orgId));
  /**
   * Running machines of an organization whose account grants nothing (canceled, unsubscribed) or whose
   * trial without overage is used up are stopped, disks captured. Only the server acts: a CLI process
   * would exit mid-stop and leave machines in `stopping`.
   */
  async function enforce(orgIds: Iterable<string>): Promise<void> {
    for (const orgId of orgIds) {
      const a = await store.billing.account(orgId);
      if (!a || (await store.machines.countRunning(orgId)) === 0) continue;
      if (!grantsEntitlements(a.state) || (await usage.exhaustion(orgId))) void machines.stopAllFor(orgId);
    }
  }
  if ((d.role ?? 'server') === 'server') {
    billing.onStateChange((e) => enforce([e.org_id]));
    metering.onFlush((orgs) => enforce(orgs));
  }
  // New compute in a used-up trial is refused like an account that grants nothing (spec: 402).
  quotas.registerGate('running_machines', async (orgId, basis) => {
    const ex = await usage.exhaustion(orgId, basis);
    if (!ex) return null;
    return ex.what === 'compute'
      ? { current: ex.used_hours, maximum: ex.included_hours, message: `The trial's ${ex.included_hours} included standard-hours of compute are used up; subscribe to a plan with overage to continue.` }
      : { current: ex.used_gb, maximum: ex.included_gb, message: `The trial's ${ex.included_gb} GB of included egress are used up; subscribe to a plan with overage to continue.` };
  });
  const ports = createPortService({ store, config, now, quotas });
  return {
    config, store, now, limiter, billing, builtin, stripe, quotas, identity, orgs, substrate, pool, agent, events, leases, sessions, machines, snapshots, templates, secrets, ports,
    metering, usage, hostFence, moveActs,
    /** Server only: stop what billing no longer allows, for every organization running machines. */
    enforceAll: async () => enforce(new Set((await store.machines.inStates(['running'])).map((m) => m.org_id))),
  };
}
export type Services = Awaited<ReturnType<typeof createServices>>;

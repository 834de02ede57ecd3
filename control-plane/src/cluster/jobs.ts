/**
 * The background jobs of a control plane, each named with the role that runs it (issue 24 item 3):
 *   - `deployment`: once per deployment, in the elected deployment leader — the session idle/expiry sweep, the
 *     metering of machine and storage intervals, the billing sync and its stops (enforceAll), and on PostgreSQL the
 *     host down sweep (`hosts`: a silent host down and its machines `error`, services/machines/host-loss.ts) and
 *     the drain (`drain`: every machine off each draining host, one at a time, services/drain.ts);
 *   - `host`: by whoever drives this host's substrate — the reconcile of machines left mid-operation, then the
 *     substrate watch and the warm pool;
 *   - `process`: in every process, for what only that process knows — the egress bytes it served (its flush) and the
 *     sessions its gateway has attached (kept active, so the leader's sweep does not idle them).
 * Which lock each role competes for is data (`Roles`): on SQLite the one process leads both (one election); on
 * PostgreSQL the host role is `'driver'`: its jobs are the host driver's work (`hostWork`, run by cluster/host-driver.ts
 * with its own lock, takeover and fence), so they follow whoever drives this host, not the deployment leader.
 * Secret redelivery is no job: it retries in the process that booted or changed the machine (services/secrets.ts).
 */
import { causeChain, silentLog, type LogSink } from '../log.js';
import type { Services } from '../services/index.js';
import { SESSION_SWEEP_MS } from '../services/sessions.js';
import { FLUSH_MS } from '../services/metering.js';
import type { DriverWork } from './host-driver.js';
import { HOST_SWEEP_MS } from '../domain/host-liveness.js';
import { createDrain } from '../services/drain.js';
import { NOT_BUILT, type MachineMove } from '../services/machine-move.js';
import { firstOutcome, onLeader, type LeaderElection, type LeaderState, type LockConnector } from './leader.js';

export type JobRole = 'deployment' | 'host' | 'process';

export interface Job {
  name: string;
  role: JobRole;
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

/**
 * The lock each elected role competes for: without `host`, the host jobs ride on the deployment leader's election;
 * `'driver'`: they are not run here but by the host driver (`hostWork`).
 */
export interface Roles {
  deployment: LockConnector;
  host?: LockConnector | 'driver';
}

export interface RunningJobs {
  /** Resolves once every election has had its first outcome (leading with its jobs started, or following). */
  ready: Promise<void>;
  /** An elected role's state here (the host role's when it is the driver's: the driver has it). */
  state(role: Exclude<JobRole, 'process'>): LeaderState;
  /** Stops every job (elected ones first, releasing their locks), then the per-process ones. */
  stop(): Promise<void>;
}

/** How often the leader looks for a draining host's machines to move (each pass moves them one after another). */
export const DRAIN_TICK_MS = 2_000;

/** How often the billing provider is asked what is due (trial ends). Reads also ask, per account. */
export const BILLING_SYNC_MS = 60_000;

/** An interval job: `tick` every `ms` while started; a tick's failure is logged as `event`. */
export function every(name: string, role: JobRole, ms: number, tick: () => Promise<unknown>, log: LogSink, event: string, first?: () => Promise<void>): Job {
  let timer: NodeJS.Timeout | null = null;
  return {
    name,
    role,
    async start() {
      await first?.();
      timer = setInterval(() => void tick().catch((e: unknown) => log({ event, cause: (e as Error)?.name ?? 'Error' })), ms);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}

export interface JobOptions {
  log: LogSink;
  /** SQLite: the one process was down before it leads, and that time is not metered (metering.resume). */
  resumeMetering: boolean;
  /** The host's substrate jobs (reconcile, watch, warm pool), built by main.ts around its substrate. */
  substrate: Job | null;
  /** The jobs' periods (tests shorten them): FLUSH_MS, SESSION_SWEEP_MS, BILLING_SYNC_MS, HOST_SWEEP_MS and DRAIN_TICK_MS unless told. */
  periodsMs?: Partial<JobPeriods>;
  /** The drain's substrate seam (services/machine-move.ts); unset: NOT_BUILT, every move waits with the reason. */
  machineMove?: MachineMove;
}

export interface JobPeriods {
  flush: number;
  sweep: number;
  billing: number;
  hosts: number;
  drain: number;
}

/** The control plane's jobs, by role. */
export function controlPlaneJobs(services: Services, o: JobOptions): Job[] {
  const { log } = o;
  const ms: JobPeriods = { flush: FLUSH_MS, sweep: SESSION_SWEEP_MS, billing: BILLING_SYNC_MS, hosts: HOST_SWEEP_MS, drain: DRAIN_TICK_MS, ...o.periodsMs };
  const metered: Job = {
    name: 'metering',
    role: 'deployment',
    async start() {
      if (o.resumeMetering) await services.metering.resume();
      services.metering.meterIntervals(true);
    },
    // A last flush records the leader's intervals up to its stop (a clean shutdown loses nothing; after a lost lock the
    // cursors' compare-and-set keeps it from counting what the new leader already did).
    async stop() {
      try {
        await services.metering.flush({ notify: false });
      } finally {
        services.metering.meterIntervals(false);
      }
    },
  };
  const jobs: Job[] = [
    // Every process flushes: its own egress always, the intervals only while it leads (metered above).
    {
      name: 'flush',
      role: 'process',
      start: () => {
        services.metering.meterIntervals(false);
        services.metering.start(ms.flush, (e) => log({ event: 'metering_flush_failed', cause: (e as Error)?.name ?? 'Error' }));
      },
      stop: () => services.metering.stop(),
    },
    every('attached-sessions', 'process', ms.sweep, () => services.sessions.touchAttached(), log, 'session_touch_failed'),
    metered,
    // Changes the operator CLI recorded (a cancellation) are acted on here, by the server.
    every('billing', 'deployment', ms.billing, async () => {
      await services.billing.provider.syncAll();
      await services.enforceAll();
    }, log, 'billing_sync_failed'),
    // Sessions no client is attached to go idle, then expire (services/sessions.ts).
    every('sessions', 'deployment', ms.sweep, () => services.sessions.sweep(), log, 'session_sweep_failed', () => services.sessions.resume()),
    // A silent host is down and its machines `error` within HOST_LOSS_WITHIN_MS. Only on PostgreSQL: on SQLite the
    // one process is the one host, and a host that was off comes back through its reconcile (machines restarted).
    ...(services.store.db.engine === 'postgres' ? [hostsJob(services, ms.hosts, log), drainJob(services, o.machineMove ?? NOT_BUILT, ms.drain, log)] : []),
  ];
  return o.substrate ? [...jobs, o.substrate] : jobs;
}

/** The deployment leader's host down sweep, every `ms`; each host it marks down is logged with its failed machines. */
export function hostsJob(services: Pick<Services, 'machines'>, ms: number, log: LogSink): Job {
  return every('hosts', 'deployment', ms, async () => {
    for (const lost of await services.machines.sweepLostHosts()) log({ event: 'host.down', host: lost.hostId, machines_failed: lost.failed.length });
  }, log, 'host_sweep_failed');
}

/**
 * The deployment leader's drain (services/drain.ts), a pass every `ms`, one pass at a time. Its stop asks the pass to
 * stop between two steps and waits for it, so the lock is given up with every step it began recorded done or left
 * to be acted again by the next leader.
 */
export function drainJob(services: Pick<Services, 'store' | 'events' | 'leases' | 'now'>, move: MachineMove, ms: number, log: LogSink): Job {
  const drain = createDrain({ store: services.store, events: services.events, leases: services.leases, now: services.now, move });
  let stopping = false;
  let pass: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  const tick = () => {
    if (pass || stopping) return;
    pass = drain.tick(() => stopping)
      .catch((e: unknown) => log({ event: 'drain_failed', cause: (e as Error)?.name ?? 'Error' }))
      .finally(() => (pass = null));
  };
  return {
    name: 'drain',
    role: 'deployment',
    start() {
      stopping = false;
      timer = setInterval(tick, ms);
      timer.unref();
      tick();
    },
    async stop() {
      stopping = true;
      if (timer) clearInterval(timer);
      timer = null;
      await pass;
    },
  };
}

/** Runs `jobs`: the per-process ones at once, each elected role's while this process holds its lock. */
export function runJobs(jobs: readonly Job[], roles: Roles, opts: { intervalMs?: number; log?: LogSink; onState?: (role: 'deployment' | 'host', s: LeaderState) => void } = {}): RunningJobs {
  const log = opts.log ?? silentLog;
  const stopAll = (set: readonly Job[]) => stopJobs(set, log);
  const local = jobs.filter((j) => j.role === 'process');
  const localStarted = startJobs(local);
  // One election per distinct lock: the host role rides on the deployment's until it has its own.
  const elections = new Map<LockConnector, { roles: Array<'deployment' | 'host'>; election: LeaderElection }>();
  const firsts: Array<Promise<void>> = [];
  for (const role of ['deployment', 'host'] as const) {
    const given = roles[role];
    if (given === 'driver') continue;
    const connect = given ?? roles.deployment;
    const found = elections.get(connect);
    if (found) {
      found.roles.push(role);
      continue;
    }
    const mine: Array<'deployment' | 'host'> = [role];
    const set = () => jobs.filter((j) => j.role !== 'process' && mine.includes(j.role));
    const first = firstOutcome(log, (s) => {
      for (const r of mine) opts.onState?.(r, s);
    });
    firsts.push(first.decided);
    const election = onLeader(connect, {
      start: async () => {
        await startJobs(set());
        first.started();
      },
      stop: () => stopAll(set()),
    }, { intervalMs: opts.intervalMs, log: first.log, onState: first.onState });
    elections.set(connect, { roles: mine, election });
  }
  const byRole = (role: 'deployment' | 'host') => [...elections.values()].find((e) => e.roles.includes(role))?.election;
  return {
    ready: Promise.all([localStarted, ...firsts]).then(() => undefined),
    state: (role) => byRole(role)?.state ?? 'stopped',
    async stop() {
      for (const { election } of elections.values()) await election.stop();
      await localStarted.catch(() => undefined);
      await stopAll(local);
    },
  };
}

/** The host role's jobs as the host driver's work (cluster/host-driver.ts): started on takeover, stopped on loss. */
export function hostWork(jobs: readonly Job[], log: LogSink = silentLog): DriverWork {
  const mine = jobs.filter((j) => j.role === 'host');
  return { start: () => startJobs(mine), stop: () => stopJobs(mine, log) };
}

async function startJobs(set: readonly Job[]): Promise<void> {
  for (const j of set) await j.start();
}

/** Stops `set` in reverse order; one job's failure is logged and the others still stop. */
async function stopJobs(set: readonly Job[], log: LogSink): Promise<void> {
  for (const j of [...set].reverse()) {
    try {
      await j.stop();
    } catch (e) {
      log({ event: 'job.stop_failed', job: j.name, error: causeChain(e) });
    }
  }
}

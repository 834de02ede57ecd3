/**
 * This host's driver (issue 24 item 5, issue 25 item 1): of the processes started on one DATA_DIR (one host id),
 * exactly one drives the host's substrate. On PostgreSQL the driver holds `pg_try_advisory_lock(hostLockKey(id))`
 * on a dedicated connection (cluster/leader.ts's loop, another key than the deployment leader's); a killed driver's
 * session ends with it and another process of the host takes over. On SQLite the single process always drives.
 *
 * Taking over: store/repos/hosts.ts `takeOver` bumps the host's epoch, the driver's fence (and registers the host
 * the first time). Then a heartbeat every HOST_HEARTBEAT_MS, a compare-and-set on that epoch: when it fails (the
 * host was declared down, or another driver took over while this one's lock was gone unnoticed) the driver resigns:
 * its work stops, its lock is let go, and it competes again like any other process (a fresh takeover, a new epoch).
 */
import { createHash } from 'node:crypto';
import { HOST_HEARTBEAT_MS } from '../domain/host-liveness.js';
import { causeChain, silentLog, type LogSink } from '../log.js';
import type { HostFence, HostRegistration, HostsRepo } from '../store/repos/hosts.js';
import { onLeader, postgresLock, type LeaderState, type LockConnector } from './leader.js';
import { sleeper } from './session.js';

/** The advisory lock key of a host's driver: a stable signed 64-bit hash of its id (never the leader's key). */
export function hostLockKey(hostId: string): bigint {
  return createHash('sha256').update(`computer host driver\0${hostId}`).digest().readBigInt64BE(0);
}

/** The lock a driver of `hostId` holds on PostgreSQL at `url`. */
export function hostDriverLock(url: string, hostId: string): LockConnector {
  return postgresLock(url, hostLockKey(hostId), { applicationName: 'computer-host-driver' });
}

/** What runs while this process drives the host (the substrate's acts, later), fenced by `fence`. */
export interface DriverWork {
  start(fence: HostFence): void | Promise<void>;
  stop(): void | Promise<void>;
}

export interface HostDriverOptions {
  hosts: HostsRepo;
  registration: HostRegistration;
  /** `hostDriverLock(url, id)` on PostgreSQL, `alwaysLeader` on SQLite. */
  connect: LockConnector;
  work?: DriverWork;
  heartbeatMs?: number;
  /** Between two attempts to become the driver. Default 1000. */
  intervalMs?: number;
  log?: LogSink;
  onState?: (state: LeaderState) => void;
}

export interface HostDriver {
  readonly state: LeaderState;
  /** The fence while driving, else null. */
  readonly fence: HostFence | null;
  stop(): Promise<void>;
}

export function driveHost(o: HostDriverOptions): HostDriver {
  const log = o.log ?? silentLog;
  const heartbeatMs = o.heartbeatMs ?? HOST_HEARTBEAT_MS;
  let fence: HostFence | null = null;
  let beating: { stop(): Promise<void> } | null = null;

  const heartbeats = (held: HostFence, resign: () => void) => {
    const z = sleeper();
    let stopping = false;
    const running = (async () => {
      while (!stopping) {
        await z.sleep(heartbeatMs);
        if (stopping) break;
        try {
          if (await o.hosts.heartbeat(held)) continue;
          log({ event: 'host.driver_fenced', host: held.hostId, epoch: held.epoch });
          resign();
          break;
        } catch (e) {
          // The database is unreachable: keep trying; if it lasts, the host is declared down and the next
          // heartbeat that reaches the database fails the compare-and-set.
          log({ event: 'host.heartbeat_failed', host: held.hostId, error: causeChain(e) });
        }
      }
    })();
    return {
      async stop() {
        stopping = true;
        z.wake();
        await running;
      },
    };
  };

  const election = onLeader(
    o.connect,
    {
      async start(resign) {
        const { epoch, adopted } = await o.hosts.takeOver(o.registration);
        fence = { hostId: o.registration.id, epoch };
        log({ event: 'host.driving', host: fence.hostId, epoch, adopted });
        beating = heartbeats(fence, resign);
        await o.work?.start(fence);
      },
      async stop() {
        await beating?.stop();
        beating = null;
        if (fence) await o.work?.stop();
        fence = null;
      },
    },
    { intervalMs: o.intervalMs, log, onState: o.onState },
  );
  return {
    get state() {
      return election.state;
    },
    get fence() {
      return fence;
    },
    stop: () => election.stop(),
  };
}

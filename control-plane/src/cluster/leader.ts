/**
 * Leader election: the jobs that must run once per deployment, not once per process (session sweeps, the metering
 * flush, the reconciler, billing stops, secret redelivery, the substrate watch) run only in the process holding
 * the lock. On PostgreSQL the lock is `pg_try_advisory_lock` held on a dedicated connection: it dies with the
 * session, so a killed leader is replaced at the next attempt of another process once PostgreSQL sees the
 * connection close. On SQLite the single process is always the leader (`alwaysLeader`).
 *
 * Loss: when the leader's connection fails (an error, its end, or a liveness query that fails or times out) its
 * jobs are stopped before anything else, then it reconnects and competes again like any follower.
 */
import { causeChain, silentLog, type LogSink } from '../log.js';
import { dedicatedClient, sessionLoop, sleeper } from './session.js';

/** pg_try_advisory_lock key of the deployment-wide leader ("computer leader"). */
export const DEPLOYMENT_LEADER_KEY = 0x636c6472;

export type LeaderState = 'disconnected' | 'following' | 'leading' | 'stopped';

export interface LeaderJobs {
  /**
   * `resign`: the jobs found they may no longer lead (a host driver whose epoch moved): the loop stops them, lets
   * the lock go (closing the session) and competes again after its interval.
   */
  start(resign: () => void): void | Promise<void>;
  stop(): void | Promise<void>;
}

/** One session able to hold the lock: the OS-facing part, small so the loop can be read without PostgreSQL. */
export interface LockSession {
  tryLock(): Promise<boolean>;
  /** Resolves while the session (and so a lock it holds) is alive; rejects otherwise. */
  ping(): Promise<void>;
  /** Called at most once, when the session fails by itself. */
  onLost(fn: () => void): void;
  close(): Promise<void>;
}

export type LockConnector = () => Promise<LockSession>;

export interface LeaderElection {
  readonly state: LeaderState;
  /** Stops the jobs if leading, releases the lock and ends the loop. */
  stop(): Promise<void>;
}

export interface LeaderOptions {
  /** Between two attempts of a follower, two liveness checks of the leader, and two reconnects. Default 1000. */
  intervalMs?: number;
  log?: LogSink;
  onState?: (state: LeaderState) => void;
}

/** SQLite: one process, always the leader. */
export const alwaysLeader: LockConnector = async () => ({
  tryLock: async () => true,
  ping: async () => undefined,
  onLost: () => undefined,
  close: async () => undefined,
});

/** A dedicated connection (never a pooled one: the lock belongs to the session) holding advisory lock `key`. */
export function postgresLock(url: string, key: number | bigint = DEPLOYMENT_LEADER_KEY, opts: { queryTimeoutMs?: number; applicationName?: string } = {}): LockConnector {
  return async () => {
    const { client, onLost, close } = await dedicatedClient(url, opts.applicationName ?? 'computer-leader', { query_timeout: opts.queryTimeoutMs ?? 5000 });
    return {
      tryLock: async () => (await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [key])).rows[0]!.locked,
      ping: async () => {
        await client.query('SELECT 1');
      },
      onLost,
      close,
    };
  };
}

/**
 * An election's first outcome, for a caller that waits for it (serve's start): `decided` resolves once this process
 * leads with its work started (call `started()` then), follows, or its lock session failed. `log` and `onState` are
 * the hooks to give the election; `onState` is passed on.
 */
export function firstOutcome(log: LogSink, onState?: (s: LeaderState) => void) {
  let done: () => void = () => undefined;
  const decided = new Promise<void>((r) => (done = r));
  return {
    decided,
    started: () => done(),
    log: ((l) => {
      log(l);
      if (l.event === 'leader.session_failed') done();
    }) satisfies LogSink,
    onState: (s: LeaderState) => {
      if (s === 'following') done();
      onState?.(s);
    },
  };
}

export function onLeader(connect: LockConnector, jobs: LeaderJobs, opts: LeaderOptions = {}): LeaderElection {
  const intervalMs = opts.intervalMs ?? 1000;
  const log = opts.log ?? silentLog;
  let state: LeaderState = 'disconnected';
  const z = sleeper();
  const set = (next: LeaderState) => {
    if (next === state) return;
    state = next;
    log({ event: 'leader.state', state });
    opts.onState?.(next);
  };
  const session = async () => {
    let lock: LockSession | undefined;
    try {
      lock = await connect();
      let lost = false;
      const end = () => {
        lost = true;
        z.wake();
      };
      lock.onLost(end);
      while (!loop.stopping && !lost) {
        if (state === 'leading') await lock.ping();
        else if (await lock.tryLock()) {
          set('leading');
          await jobs.start(end);
        } else set('following');
        if (!loop.stopping && !lost) await z.sleep(intervalMs);
      }
    } catch (e) {
      log({ event: 'leader.session_failed', error: causeChain(e) });
    }
    // Jobs stop before the lock can be released (closing the session), so two leaders never overlap from here.
    if (state === 'leading') {
      try {
        await jobs.stop();
      } catch (e) {
        log({ event: 'leader.stop_failed', error: causeChain(e) });
      }
    }
    set('disconnected');
    await lock?.close();
  };

  const loop = sessionLoop(session, intervalMs, z, () => set('stopped'));
  return {
    get state() {
      return state;
    },
    stop: () => loop.stop(),
  };
}

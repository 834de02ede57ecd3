/**
 * The host-driver job (cluster/jobs.ts, role `host`): once the substrate is there, machines a previous run left
 * mid-operation are settled (reconcile), then the substrate watch (a machine killed or shut down from outside leaves
 * `running` within seconds) and the warm pool run until the job stops; the stop drains the pool (started-but-unassigned
 * machines are not kept across runs: the next run's image may differ).
 */
import type { LogSink } from '../log.js';
import type { Services } from '../services/index.js';
import type { Job } from './jobs.js';

export interface SubstrateJobOptions {
  /** A substrate still being prepared (its image builds in the background); rejects when it cannot be. */
  ready?: Promise<unknown>;
  say: (line: string) => void;
  log: LogSink;
  /** How often pins nothing holds any more are released (default 5 minutes; snapshots.sweepPins). */
  pinSweepMs?: number;
}

/** Copies of deleted snapshots and templates are let go within this long on every host (docs/substrates.md). */
export const PIN_SWEEP_MS = 5 * 60_000;

export function substrateJob(services: Services, o: SubstrateJobOptions): Job {
  let stopWatch: (() => void) | null = null;
  let stopped = false;
  /** `before`: the instant this process began driving the host; what was begun before it is a previous driver's. */
  const run = async (before: string) => {
    try {
      await (o.ready ?? Promise.resolve());
    } catch (e) {
      o.say(`substrate unavailable: ${(e as Error)?.message ?? String(e)}`);
      await services.machines.substrateUnavailable();
      return;
    }
    try {
      const moved = await services.machines.reconcile({ before });
      if (moved.length) o.say(`reconciled ${moved.length} machine(s) left mid-operation`);
    } catch (e) {
      o.log({ event: 'reconcile_failed', cause: (e as Error)?.name ?? 'Error' });
    }
    if (stopped) return;
    const stopMachineWatch = services.machines.startWatch();
    const sweep = setInterval(() => {
      services.snapshots.sweepPins().catch((e: unknown) => o.log({ event: 'pin_sweep_failed', cause: (e as Error)?.name ?? 'Error' }));
      // What finished drain moves left here (an old disk of a machine now elsewhere, the moves' pins).
      services.machines.sweepMoves().catch((e: unknown) => o.log({ event: 'move_sweep_failed', cause: (e as Error)?.name ?? 'Error' }));
    }, o.pinSweepMs ?? PIN_SWEEP_MS);
    sweep.unref();
    stopWatch = () => {
      stopMachineWatch();
      clearInterval(sweep);
    };
    // After the reconcile: it destroyed what a previous run's pool left (services/machines/warm-pool.ts).
    services.machines.warmPool.start();
  };
  return {
    name: 'substrate',
    role: 'host',
    // Not awaited: the API serves while the image builds.
    start() {
      stopped = false;
      // The takeover's instant, not the process's start: only the host's driver acts on its substrate, so an
      // operation begun before this process drove the host was the previous driver's, even one begun after this
      // process started (it was following then); on SQLite the job starts before the API listens, as before.
      void run(new Date().toISOString()).catch((e: unknown) => o.log({ event: 'reconcile_failed', cause: (e as Error)?.name ?? 'Error' }));
    },
    async stop() {
      stopped = true;
      stopWatch?.();
      stopWatch = null;
      await services.machines.warmPool.drain();
    },
  };
}

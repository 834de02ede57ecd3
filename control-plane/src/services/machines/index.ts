/**
 * The machine service's facade: one object over the concerns of this folder, each its own file over the shared
 * core (core.ts: decide and record → act → record the outcome). Wiring only; no decision is made here.
 *
 *   reads        get, list
 *   create       create and fork (admission.ts: quotas, capacity, plan size, name; a plain create may take a
 *                warm-pool.ts member)
 *   warm-pool    started-but-unassigned machines per size (pool-ledger.ts: what the pool holds, on disk)
 *   lifecycle    update, stop, start, restart, delete
 *   restore      onto one of the machine's snapshots
 *   reconcile    at start, by the table in domain/machine-reconcile.ts (then what finished moves left: ../move-sweep.ts)
 *   host-loss    a silent host's machines to error (the leader), and back to stopped when it returns (its driver)
 *   watch        the substrate watch (disk-volume.ts: read-only-volume recovery; host-starts.ts)
 *   billing-stops  stops for an account that stopped granting compute
 *   ready        display readiness and the boot listeners
 */
import { createBillingStops } from './billing-stops.js';
import { createMachineCore, type MachineServiceDeps } from './core.js';
import { createMachineCreation } from './create.js';
import { createDiskVolumeRecovery } from './disk-volume.js';
import { createHostLoss } from './host-loss.js';
import { createHostStarts } from './host-starts.js';
import { createLifecycleActs, createLifecycleMoves } from './lifecycle.js';
import { createMachineReads } from './reads.js';
import { createReadiness } from './ready.js';
import { createReconcile } from './reconcile.js';
import { createRestore } from './restore.js';
import { createSubstrateWatch } from './watch.js';
import { createWarmPool } from './warm-pool.js';
import { createMoveSweep } from '../move-sweep.js';

export { machineView, type MachineServiceDeps } from './core.js';

export function createMachineService(d: MachineServiceDeps) {
  const c = createMachineCore(d);
  const ready = createReadiness(c);
  const acts = createLifecycleActs(c, ready);
  const host = createHostStarts(c, ready);
  const warmPool = createWarmPool(c);
  const creation = createMachineCreation(c, ready, warmPool);
  const moves = createLifecycleMoves(c, acts);
  const { restore } = createRestore(c, ready);
  const { watchPass, startWatch } = createSubstrateWatch(c, createDiskVolumeRecovery(c, host));
  const reads = createMachineReads(c);
  const hostLoss = createHostLoss(c);
  const sweepMoves = createMoveSweep({ store: d.store, substrate: d.substrate, locks: d.locks, hostId: d.hostId ?? null, onFailure: d.onFailure });

  return {
    /** Run `fn` after every boot of any machine (outside any transaction; must not throw). */
    onBoot: ready.onBoot,
    /** A boot this service did not make (a drain's start, services/move-acts.ts): the boot listeners and the ready probe. */
    booted: ready.watchReady,
    get: reads.get,
    list: reads.list,
    create: creation.create,
    fork: creation.fork,
    restore,
    update: moves.update,
    stop: moves.stop,
    start: moves.start,
    restart: moves.restart,
    remove: moves.remove,
    /** Settles machines a previous run left in transient states, and running machines the host lost. */
    reconcile: createReconcile(c, ready, host, warmPool, sweepMoves),
    /** What finished drain moves left on this host (services/move-sweep.ts); the reconcile and the pin sweep run it. */
    sweepMoves,
    /** The warm pool of started-but-unassigned machines (main.ts starts it after the reconcile, drains it at close). */
    warmPool,
    watchPass,
    /** The substrate could not be prepared (main.ts): host.unhealthy to every live machine. */
    async substrateUnavailable(): Promise<void> {
      await d.hostHealth?.substrateAnswered(false);
    },
    startWatch,
    /** The deployment leader's down sweep (cluster/jobs.ts `hosts`): silent hosts down, their machines `error`. */
    sweepLostHosts: hostLoss.sweepLostHosts,
    /** A returning host driver's first act (its work's start, with its fence): lost machines back to `stopped`. */
    recoverAfterHostLoss: hostLoss.recoverAfterHostLoss,
    stopAllFor: createBillingStops(c, acts),
  };
}
export type MachineService = ReturnType<typeof createMachineService>;

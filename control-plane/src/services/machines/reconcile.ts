/**
 * Reconcile at start: settles machines a previous run left in transient states, and running machines the host
 * lost. The decision is the table in domain/machine-reconcile.ts; this file acts on it and records the outcome.
 */
import type { MachineState } from '../../../../shared/schemas/machine.js';
import { reconcileAction } from '../../domain/machine-reconcile.js';
import type { SubstrateStatus } from '../../substrate/substrate.js';
import { SYSTEM } from '../actor.js';
import type { MachineCore } from './core.js';
import type { HostStarts } from './host-starts.js';
import type { Readiness } from './ready.js';
import { ERRORS } from '../../errors.js';
import type { WarmPool } from './warm-pool.js';
import type { MoveSweep } from '../move-sweep.js';

export type ReconcileResult = Array<{ id: string; from: MachineState; to: MachineState | 'deleted' }>;

export function createReconcile(c: MachineCore, ready: Readiness, host: HostStarts, pool: WarmPool, sweepMoves: MoveSweep) {
  const { d } = c;
  const { store, substrate, events } = d;

  /**
   * Run once at start; `before` (the start time) keeps it off machines this run is already moving.
   */
  return async function reconcile(opts: { before?: string } = {}): Promise<ReconcileResult> {
    // Only what the previous run left: a machine this run moved since it started has a live caller.
    const before = opts.before ?? c.at();
    const out: ReconcileResult = [];
    // First what a previous run's warm pool left: members no row took are destroyed (never a tenant's).
    await pool.reconcile().catch((e) => d.onFailure?.('*', 'pool_reconcile', e));
    let seen: Map<string, SubstrateStatus>;
    try {
      seen = new Map((await substrate.reattach()).map((x) => [x.id, x.status]));
    } catch (e) {
      d.onFailure?.('*', 'reattach', e);
      seen = new Map();
    }
    // Disks of machines deleted while this host was down (lifecycle.ts `remove`: the row went, the disk could not):
    // destroyed now. Only rows recorded on this host; a disk with no row at all (a warm pool member) is the pool's.
    for (const id of seen.keys()) {
      const gone = await store.machines.anyById(id);
      if (!gone?.deleted_at || !c.onThisHost([gone]).length) continue;
      await substrate.destroy(id).then(
        () => out.push({ id, from: 'deleting', to: 'deleted' }),
        (e: unknown) => d.onFailure?.(id, 'reconcile_cleanup', e),
      );
    }
    // Every row, resting ones too: a stopped machine whose create a crash interrupted has no disk at all.
    // This host's rows only: another host's machines are absent here, and not this driver's to settle.
    const rows = c.onThisHost(await store.machines.inStates(['creating', 'starting', 'stopping', 'deleting', 'running', 'stopped', 'error'])).filter((m) => m.state_changed_at < before);
    for (const m of rows) {
      const status: SubstrateStatus = seen.get(m.id) ?? (await substrate.status(m.id).catch((): SubstrateStatus => 'lost'));
      const from = m.state;
      let recovered = false;
      const act = reconcileAction(from, status);
      try {
        switch (act.do) {
          case 'nothing':
            break;
          case 'clear_interrupted_create':
            // The create never reached the substrate (or never finished its disk): clean whatever part of it
            // exists and say so; a start then answers 409 (delete and create again), never a 503 to retry.
            await substrate.destroy(m.id).catch((e) => d.onFailure?.(m.id, 'reconcile_cleanup', e));
            await store.db.tx(async () => {
              if (!(await store.machines.casState(m.id, from, c.decideTo(from, 'fail'), c.at(), c.fence()))) return;
              await events.append(m.org_id, m.id, 'machine.failed', {
                from, to: 'error', operation: 'create', code: 'conflict', reason: 'create_interrupted', reconciled: true,
              });
            });
            break;
          case 'finish_delete':
            await substrate.destroy(m.id);
            await store.db.tx(async () => {
              if (await store.machines.markDeleted(m.id, c.at(), c.fence())) await events.append(m.org_id, m.id, 'machine.deleted', { by: SYSTEM, reconciled: true });
            });
            out.push({ id: m.id, from, to: 'deleted' });
            continue;
          case 'finish_stop':
            if (act.stopFirst) await substrate.stop(m.id);
            await c.settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by: SYSTEM, reconciled: true });
            break;
          case 'finish_boot':
            if (await c.settle(m, from, act.trigger, 'machine.started', { by: SYSTEM, reconciled: true })) ready.watchReady(m);
            break;
          case 'fail':
            await c.fail(m, from, act.operation, ERRORS.lostByHost());
            break;
          case 'recover':
            recovered = await host.recoverLost(m);
            break;
        }
      } catch (e) {
        await c.fail(m, from, 'reconcile', e);
      }
      const after = await store.machines.byId(m.id);
      if (after && (after.state !== from || recovered)) out.push({ id: m.id, from, to: after.state });
    }
    // Captures a previous run left pending, and layer pins nothing holds any more.
    await d.snapshots.reconcile(before);
    // What finished moves left here: the old disk of a machine now on another host, the moves' pins (move-sweep.ts).
    await sweepMoves().catch((e: unknown) => d.onFailure?.('*', 'move_sweep', e));
    return out;
  };
}


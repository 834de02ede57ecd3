/**
 * The warm pool's decisions, as data (pure: imports only shared/). A pool of started-but-unassigned machines
 * per size on this host (one guest image per control plane, so per (image, size)); a plain create takes one
 * instead of booting (docs/api-machines.md, "Warm starts").
 */
import type { MachineSize } from '../../../shared/schemas/machine.js';

/** How far back creates count as demand for a size. */
export const POOL_DEMAND_WINDOW_MS = 15 * 60_000;

/**
 * Which creates may come from the pool: only a plain create of the pool's image, started. A pool member booted
 * on the base image with nothing in it: a template's disk (a captured layer) or a fork's (the parent's) is not
 * that disk, and a create with `start: false` wants a stopped machine, not a running one.
 */
export function poolEligible(req: { template?: string | undefined; start: boolean }): boolean {
  return req.template === undefined && req.start;
}

/**
 * How many members a size should hold: one per create of that size within the window, never more than `cap`
 * (the operator's WARM_POOL_PER_SIZE; 0 disables the pool). A size nobody created lately holds none.
 */
export function poolTarget(createsInWindow: number, cap: number): number {
  return Math.max(0, Math.min(cap, createsInWindow));
}

/** What the host allows the pool right now. */
export interface PoolHost {
  /** Below the disk reserve (services/host-health.ts): the pool gives its disk back. */
  diskLow: boolean;
  /** One more member of this size fits the host's commit limits on top of the tenants' machines and the pool. */
  roomForOne: boolean;
  /** The tenants' machines plus the pool exceed the commit limits (tenants were admitted past the pool). */
  overCommitted: boolean;
}

export type PoolStep = { do: 'nothing' } | { do: 'fill' } | { do: 'drain'; n: number };

/**
 * One step for one size, given its target and what it holds (ready and being made). The pool never holds a
 * tenant's room: tenants' admission does not count it (admission.ts), and when they take it the pool shrinks.
 */
export function poolStep(target: number, held: number, host: PoolHost): PoolStep {
  if (host.diskLow) return held > 0 ? { do: 'drain', n: held } : { do: 'nothing' };
  if (host.overCommitted && held > 0) return { do: 'drain', n: 1 };
  if (held > target) return { do: 'drain', n: held - target };
  if (held < target && host.roomForOne) return { do: 'fill' };
  return { do: 'nothing' };
}

/**
 * At start, for each member a previous run's ledger names (services/machines/warm-pool.ts `reconcile`): a live
 * machine row with its id means a take committed (its row is the tenant's, settled by machine-reconcile.ts's
 * table): the ledger only forgets it. No live row: a member nobody took (ready, or being made, when that run
 * died; or taken and since deleted): destroyed. Pool members are never kept across runs.
 */
export type PoolLeftover = 'forget' | 'destroy';

export function poolLeftover(hasLiveRow: boolean): PoolLeftover {
  return hasLiveRow ? 'forget' : 'destroy';
}

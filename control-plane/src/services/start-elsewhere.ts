/**
 * A start on a full host (issue 25 item 2, restart on another host; docs/cluster.md "A start on a full host"). A start
 * of a stopped machine is served by its host's driver; when the admission there refuses it for room (`roomOnHost`,
 * kind `start`), the machine is moved to the host placement ranks best for its size in its region (capacity, spread;
 * never this host) with the drain's own steps and records (services/drain.ts), then started there:
 *
 * 1. decide and record: one transaction, the organization's running_machines quota checked (402) and a
 *    `drain.planned` record `why: start` with the target (a compare-and-set on the machine's newest drain record, the
 *    machine still `stopped` on this host): a second start meanwhile finds the move open and continues it instead;
 * 2. act, each step recorded begun and done as a drain's: capture at rest here, pinned by the move's holder
 *    (move-acts.ts `moveHolder`, naming this plan); pull onto the target; make the disk there; rehome (host_id
 *    rewritten once the disk is there, the target's memory, CPU and disk re-checked under its row lock, fenced as the
 *    drain's); start through the target's driver (the host call `start`), recorded `starting` then `running` with
 *    `machine.started {by: the caller, reason: moved_to_another_host}`;
 * 3. the outcome: every step done is `drain.finished`, and the pins on both hosts and the old disk here go with the
 *    move sweep (services/move-sweep.ts, at the reconcile and the pin sweep); a step that failed closes the move
 *    (`drain.finished`) so the sweep cleans up the same way, and answers 503: the machine is still stopped (on this
 *    host before the rehome, on the target with its disk there after it), or `error` when its start there failed.
 *
 * A crash between steps leaves the move open and the machine honest (stopped here; stopped on the target with its
 * disk; or `starting` there): the next start of the machine (`resume`, before anything else) continues the move
 * from its records, as does the drain when a host drains. Nothing ever shows a half-moved machine running. No other
 * host with room: the caller answers its own 503, nothing recorded. No host id reaches the tenant: the drain's
 * records are never listed to one.
 */
import { AppError } from '../../../shared/errors.js';
import type { CatalogVersion } from '../domain/catalog.js';
import { DRAIN_EVENT, openMove, START_MOVE_STEPS } from '../domain/drain.js';
import { decide } from '../domain/machine-lifecycle.js';
import { ERRORS } from '../errors.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { createDrain } from './drain.js';
import type { Actor, EventService } from './events.js';
import type { LeaseService } from './leases.js';
import type { MachineMove } from './machine-move.js';
import { placeFor } from './placement.js';
import type { QuotaService } from './quotas.js';

export interface StartElsewhereDeps {
  store: Store;
  events: EventService;
  leases: LeaseService;
  quotas: Pick<QuotaService, 'check'>;
  /** The drain's seam (cluster/machine-move.ts): this host's acts here, the target's over host calls. */
  move: MachineMove;
  /** This process's host: the machine's, whose admission refused the start. */
  hostId: string;
  now: () => Date;
  catalog?: readonly CatalogVersion[];
}

/** What a move that is no longer acted ended as. */
type Ended = 'started' | 'failed' | 'busy' | 'changed';

export function createStartElsewhere(d: StartElsewhereDeps) {
  const { store } = d;
  const drain = createDrain(d);
  const at = () => d.now().toISOString();

  /** The best other host with room for `m` in its region (the host's when it has none); null: none, or no moves here. */
  async function target(m: MachineRow): Promise<string | null> {
    try {
      await d.move.ready();
      const region = m.region ?? (await store.hosts.get(d.hostId))?.region ?? null;
      const placed = await placeFor(store, { size: m.size, region }, { now: d.now(), ...(d.catalog ? { catalog: d.catalog } : {}) });
      return placed.kind === 'hosts' ? (placed.ranked.find((h) => h !== d.hostId) ?? null) : null;
    } catch (e) {
      if (e instanceof AppError) return null;
      throw e;
    }
  }

  /** Decide and record the move of stopped `m` to `to`; false when it is no longer stopped here or a move is open. */
  function plan(m: MachineRow, to: string): Promise<boolean> {
    return store.db.tx(async () => {
      const seq = await store.drain.newestSeq(m.id);
      if (openMove(await store.drain.records(m.id)) !== null) return false;
      await d.quotas.check(m.org_id, 'running_machines');
      const now = await store.machines.byId(m.id);
      if (now?.state !== 'stopped' || now.host_id !== d.hostId) return false;
      const planned = { type: DRAIN_EVENT.planned, from: d.hostId, to, was: 'stopped' as const, steps: [...START_MOVE_STEPS], why: 'start' as const };
      return (await store.drain.append(m, seq, planned, at())) !== null;
    });
  }

  /**
   * After a move was acted as far as it goes: started; or a step failed, and the move is closed (`drain.finished`,
   * the machine `error` when it was `starting` on the target: its start there failed); or someone else acts it now
   * (`busy`), or it ended with the machine moved by someone else (`changed`).
   */
  async function ended(id: string): Promise<Ended> {
    return store.db.tx(async () => {
      const seq = await store.drain.newestSeq(id);
      const records = await store.drain.records(id);
      const m = await store.machines.anyById(id);
      const open = openMove(records);
      if (!m || m.deleted_at !== null) return 'changed';
      if (open === null) return m.state === 'running' ? 'started' : 'changed';
      if (records[records.length - 1]?.type !== DRAIN_EVENT.failed) return 'busy';
      const finished = await store.drain.append(m, seq, { type: DRAIN_EVENT.finished, from: open.from, to: m.host_id ?? open.from, state: m.state === 'starting' ? 'error' : m.state }, at());
      if (finished === null) return 'busy';
      if (m.state === 'starting' && decide('starting', 'fail').ok && (await store.machines.casState(id, 'starting', 'error', at()))) {
        await d.events.append(m.org_id, id, 'machine.failed', { from: 'starting', to: 'error', operation: 'start', code: 'compute_unavailable' });
      }
      return 'failed';
    });
  }

  /** Acts `id`'s open move to its end and answers for it: resolves when the machine runs, else throws. */
  async function drive(id: string, by: Actor): Promise<void> {
    await drain.continueMove(id, () => false, by);
    const end = await ended(id);
    if (end === 'started') return;
    if (end === 'busy') throw ERRORS.machineSettling('moving to a host with room');
    if (end === 'changed') throw ERRORS.machineChangedState((await store.machines.byId(id))?.state ?? 'deleted');
    throw (await store.machines.byId(id))?.state === 'error' ? ERRORS.machineFailedStart() : ERRORS.startMoveFailed();
  }

  /** Whether `id` has an open start's move (a drain's open move is the drain's to act). */
  const openStart = async (id: string): Promise<boolean> => openMove(await store.drain.records(id))?.why === 'start';

  return {
    /**
     * Before a start of `m` decides anything: a start's move of it left open (its process killed between steps) is
     * continued to its end, and true returned (it runs, or this throws); false: none open, the start goes on.
     */
    async resume(m: MachineRow, by: Actor): Promise<boolean> {
      if (!(await openStart(m.id))) return false;
      await drive(m.id, by);
      return true;
    },

    /**
     * `m`, stopped on this host which has no room for it, moved to the best host with room and started there;
     * false when no other host has room (nothing recorded: the caller answers its 503). Throws 402 (running_machines),
     * 503 when the move or the start there failed.
     */
    async start(m: MachineRow, by: Actor): Promise<boolean> {
      if (m.state !== 'stopped' || m.host_id !== d.hostId) return false;
      const to = await target(m);
      if (to === null) return false;
      if (!(await plan(m, to)) && !(await openStart(m.id))) return false;
      await drive(m.id, by);
      return true;
    },
  };
}

export type StartElsewhere = ReturnType<typeof createStartElsewhere>;

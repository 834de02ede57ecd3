/**
 * The drain (issue 25 item 6; docs/operations.md "Draining a host"): the deployment leader's job (cluster/jobs.ts,
 * `drain`, PostgreSQL only) moves every machine off each `draining` host, one machine at a time, by the plan its
 * state calls for (domain/drain.ts), through the substrate seam (services/machine-move.ts).
 *
 * Each step is decide and record (`drain.step begun`, with the machine's state move when the step makes one), act
 * (the seam), record the outcome (`drain.step done`, with the state move and the tenant's event): every record is a
 * compare-and-set on the machine's newest drain event (store/repos/drain.ts `append`), so a stale leader records
 * nothing, and a successor resumes the move where the records stand, never acting a step recorded done again.
 *
 * - The target is placement's best host for the machine's size and region hint (services/placement.ts `placeFor`:
 *   only `active` hosts, so never the draining one); none fits → `drain.waiting` with the reason, the machine stays
 *   where it is, and the drain comes back to it on the next tick. Nothing is dropped.
 * - `rehome` writes machines.host_id only once the disk is on the target, in one transaction with the target's
 *   capacity re-checked under its row lock (`roomOnHost`), compare-and-set on the host and state read.
 * - The tenant sees a running machine `machine.stopped {reason: moving_to_another_host}`, then `machine.started
 *   {reason: moved_to_another_host}`: no host id or address reaches a tenant (drain events are never listed to one).
 * - A failing step is `drain.failed` (its error's code and, for the control plane's own errors, its message; never
 *   a cause) and is tried again on the next tick; a step failing the same way again records nothing more.
 */
import { AppError } from '../../../shared/errors.js';
import type { MachineState } from '../../../shared/schemas/machine.js';
import { DRAIN_EVENT, DRAIN_PLANS, openMove, stateForStep, type DrainRecord, type DrainStep, type OpenMove } from '../domain/drain.js';
import { decide } from '../domain/machine-lifecycle.js';
import type { DrainEntry } from '../store/repos/drain.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { SYSTEM } from './actor.js';
import type { Actor, EventService } from './events.js';
import type { LeaseService } from './leases.js';
import type { MachineMove } from './machine-move.js';
import { placeFor, roomOnHost, type PlacementPricing } from './placement.js';

/** The reasons the tenant's events carry for a move (no host named). */
export const MOVE_REASONS = { stopped: 'moving_to_another_host', started: 'moved_to_another_host' } as const;

export interface DrainDeps {
  store: Store;
  events: EventService;
  leases: LeaseService;
  move: MachineMove;
  now: () => Date;
  catalog?: PlacementPricing['catalog'];
}

/** Thrown inside the rehome's transaction to roll it back when another leader recorded first. */
const RACED = Symbol('raced');

/** Bounds of what the seam answers (it may relay another host's answer). */
const MAX_CHAIN = 200;

const last = (records: readonly DrainRecord[]) => records[records.length - 1];

export function createDrain(d: DrainDeps) {
  const { store, move } = d;
  const at = () => d.now().toISOString();
  const pricing = (): PlacementPricing => ({ now: d.now(), ...(d.catalog ? { catalog: d.catalog } : {}) });

  /**
   * A machine's drain records and the seq a decision on them is recorded against: read first, so a record landing
   * in between makes that decision's compare-and-set fail rather than be made twice.
   */
  const read = async (id: string): Promise<{ seq: number; records: DrainRecord[] }> => {
    const seq = await store.drain.newestSeq(id);
    return { seq, records: await store.drain.records(id) };
  };

  /** Records `entry` on `m` if its newest drain record is still `expect`; the new seq, or null: another leader moved first. */
  const record = (m: MachineRow, expect: number, entry: DrainEntry): Promise<number | null> => store.drain.append(m, expect, entry, at());

  /** A compare-and-set of the machine's state by the lifecycle table; false when it is not in `from` (or the move is not one). */
  const moveState = async (m: MachineRow, from: MachineState, trigger: 'stop' | 'shutdown_complete' | 'start' | 'boot_complete'): Promise<boolean> => {
    const dec = decide(from, trigger);
    return dec.ok && (await store.machines.casState(m.id, from, dec.to, at())) !== null;
  };

  async function recordWaiting(m: MachineRow, now: { seq: number; records: DrainRecord[] }, from: string, reason: string): Promise<void> {
    const newest = last(now.records);
    if (newest?.type === 'drain.waiting' && newest.from === from && newest.reason === reason) return;
    await record(m, now.seq, { type: DRAIN_EVENT.waiting, from, reason });
  }

  /** Plans the move of `m` off `from` (or records why it waits), on its records as `now` read them. */
  async function plan(m: MachineRow, now: { seq: number; records: DrainRecord[] }, from: string): Promise<boolean> {
    const p = DRAIN_PLANS[m.state];
    if (p.kind === 'wait') {
      await recordWaiting(m, now, from, p.reason);
      return false;
    }
    let to: string;
    try {
      await move.ready();
      const placed = await placeFor(store, { size: m.size, region: m.region }, pricing());
      if (placed.kind !== 'hosts') throw new Error('no host is registered');
      to = placed.ranked[0]!;
    } catch (e) {
      await recordWaiting(m, now, from, e instanceof AppError ? e.message : 'placement failed');
      return false;
    }
    return (await record(m, now.seq, { type: DRAIN_EVENT.planned, from, to, was: m.state, steps: [...p.steps] })) !== null;
  }

  /**
   * One step of `open` on `m`: begun, acted, done. False: it did not complete (failed, raced, or refused). `by`: who
   * the tenant's `machine.started` names (the system for a drain, the caller for a start's move).
   */
  async function step(m: MachineRow, open: OpenMove, s: DrainStep, now: { seq: number; records: DrainRecord[] }, by: Actor): Promise<boolean> {
    const base = { from: open.from, to: open.to, step: s };
    const newest = last(now.records);
    let seq: number | null = now.seq;
    const retrying = (newest?.type === 'drain.step' && newest.phase === 'begun' && newest.step === s) || (newest?.type === 'drain.failed' && newest.step === s);
    // Decide and record: begun, with the state move the step starts (a retry has both recorded already).
    if (!retrying) {
      seq = await store.db.tx(async () => {
        const begun = await record(m, now.seq, { type: DRAIN_EVENT.step, ...base, phase: 'begun', bytes: null, chain: null });
        if (begun !== null && s === 'stop' && m.state === 'running') await moveState(m, 'running', 'stop');
        if (begun !== null && s === 'start' && m.state === 'stopped') await moveState(m, 'stopped', 'start');
        return begun;
      });
      if (seq === null) return false;
    }
    // Act.
    let outcome: { bytes: number | null; chain: string | null } = { bytes: null, chain: null };
    const mv = { id: m.id, size: m.size, move: open.plannedSeq };
    try {
      if (s === 'stop') await move.stop(mv, open.from);
      else if (s === 'capture') {
        const { chain } = await move.capture(mv, open.from);
        if (typeof chain !== 'string' || chain.length === 0 || chain.length > MAX_CHAIN) throw new Error('the capture answered no usable chain');
        outcome = { bytes: null, chain };
      } else if (s === 'pull') {
        const { bytes } = await move.pull(mv, open.chain ?? '', open.from, open.to);
        outcome = { bytes: Number.isSafeInteger(bytes) && bytes >= 0 ? bytes : null, chain: null };
      } else if (s === 'make_disk') await move.makeDisk(mv, open.chain ?? '', open.to);
      else if (s === 'start') await move.start(mv, open.to);
    } catch (e) {
      const code = e instanceof AppError ? e.code : 'internal_error';
      const reason = e instanceof AppError ? e.message : 'the step failed';
      if (!(newest?.type === 'drain.failed' && newest.step === s && newest.code === code && newest.reason === reason)) {
        await record(m, seq, { type: DRAIN_EVENT.failed, ...base, code, reason });
      }
      return false;
    }
    // Record the outcome, with the state move that ends the step and the tenant's event.
    return store.db.tx(async () => {
      const now = await store.machines.byId(m.id);
      if (s === 'stop' && now?.state === 'stopping') {
        if (!(await moveState(now, 'stopping', 'shutdown_complete'))) return false;
        await d.leases.releaseInTx(m.org_id, m.id, 'machine_stopped', SYSTEM);
        await d.events.append(m.org_id, m.id, 'machine.stopped', { from: 'running', to: 'stopped', by: SYSTEM, reason: MOVE_REASONS.stopped });
      }
      if (s === 'start' && now?.state === 'starting') {
        if (!(await moveState(now, 'starting', 'boot_complete'))) return false;
        await d.events.append(m.org_id, m.id, 'machine.started', { from: 'stopped', to: 'running', by, reason: MOVE_REASONS.started });
      }
      return (await record(m, seq, { type: DRAIN_EVENT.step, ...base, phase: 'done', ...outcome })) !== null;
    });
  }

  /**
   * The rehome: host_id to the target, the target's room re-checked (its compute too when the move starts the machine
   * there), recorded done, in one transaction.
   */
  async function rehome(m: MachineRow, open: OpenMove, seq: number): Promise<'done' | 'refused' | 'lost'> {
    try {
      return await store.db.tx(async () => {
        await roomOnHost(store, open.to, { kind: 'new', size: m.size, start: open.steps.includes('start'), region: m.region }, pricing());
        if (!(await store.drain.rehome(m.id, open.from, open.to, m.state, at()))) return 'refused';
        if ((await record(m, seq, { type: DRAIN_EVENT.step, from: open.from, to: open.to, step: 'rehome', phase: 'done', bytes: null, chain: null })) !== null) return 'done';
        // Another leader recorded first: undo the host_id write with the rest.
        throw RACED;
      });
    } catch (e) {
      if (e === RACED) return 'lost';
      if (!(e instanceof AppError)) throw e;
      await record(m, seq, { type: DRAIN_EVENT.failed, from: open.from, to: open.to, step: 'rehome', code: e.code, reason: e.message });
      return 'lost';
    }
  }

  /**
   * Continues `id`'s open move step by step until it is finished, a step does not complete, or `stopping()` says the
   * job is stopping (checked between steps). `by`: who a start step's `machine.started` names.
   */
  async function continueMove(id: string, stopping: () => boolean, by: Actor = SYSTEM): Promise<void> {
    for (;;) {
      const m = await store.machines.anyById(id);
      if (!m) return;
      const now = await read(id);
      const open = openMove(now.records);
      if (!open) return;
      const finish = () => record(m, now.seq, { type: DRAIN_EVENT.finished, from: open.from, to: m.host_id ?? open.from, state: m.state });
      // Deleted meanwhile, or every step done: the move is over.
      if (m.deleted_at !== null || open.next === null) {
        await finish();
        return;
      }
      if (stopping()) return;
      const s = open.next;
      // Moved by someone else (its owner started it mid-move, say) before its disk left: this move is over, the next
      // tick plans it again from the state it is in.
      if (!stateForStep(s, open.was).includes(m.state) && m.host_id === open.from) {
        await finish();
        return;
      }
      if (s === 'rehome') {
        const r = await rehome(m, open, now.seq);
        if (r === 'refused') await finish();
        if (r !== 'done') return;
        continue;
      }
      if (!(await step(m, open, s, now, by))) return;
    }
  }

  return {
    /** Continues one machine's open move (a start's move: services/start-elsewhere.ts); see `continueMove`. */
    continueMove,
    /**
     * One pass, while some host is draining: the open moves first (a killed leader's, resumed), then every machine
     * still on a draining host, oldest first, one at a time. `stopping` is asked between steps (the job's stop).
     */
    async tick(stopping: () => boolean = () => false): Promise<void> {
      // No host draining (the usual case): one small read, nothing more (finding the open moves scans the drain
      // records, which machine_events has no index for; a move left open when its host stopped draining is resumed
      // with the next drain).
      const draining = (await store.hosts.list()).hosts.filter((h) => h.state === 'draining');
      if (draining.length === 0) return;
      for (const id of await store.drain.openMoves()) {
        if (stopping()) return;
        await continueMove(id, stopping);
      }
      for (const host of draining) {
        for (const listed of await store.machines.onHost(host.id)) {
          if (stopping()) return;
          // The records first, then the row: a move finished before this read shows in the row (on its new host), one
          // finished after it fails this plan's compare-and-set.
          const now = await read(listed.id);
          const m = await store.machines.byId(listed.id);
          if (!m || m.host_id !== host.id) continue;
          if (openMove(now.records) === null && !(await plan(m, now, host.id))) continue;
          await continueMove(m.id, stopping);
        }
      }
    },
  };
}

export type Drain = ReturnType<typeof createDrain>;

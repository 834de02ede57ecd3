/**
 * Draining a host (issue 25 item 6; docs/operations.md "Draining a host"), pure: what the drain does with each
 * machine on a draining host, by the state it is in, and where a machine's move stands, read from what the drain
 * recorded. The deployment leader's job acts on it (services/drain.ts), one machine at a time.
 *
 * - A machine's plan is chosen by its state (DRAIN_PLANS) and recorded with the target host before anything is done
 *   (`drain.planned`); the recorded plan is what is followed from then on, whatever state the move itself puts the
 *   machine in (a running machine is `stopped` in the middle of its move).
 * - Each step is recorded begun, acted, recorded done (`drain.step`); a step begun and never done (a killed leader)
 *   is acted again, so every act is idempotent; a step done is never acted again.
 * - `rehome` is the one write of machines.host_id: only once the disk is made on the target.
 * - A machine in a passing state (creating, starting, stopping, deleting) is waited for: the drain comes back to it.
 *   A machine in `error` keeps its disk, so it moves like a stopped one and stays `error` on the target (its owner
 *   starts or deletes it there). Nothing is ever dropped: a host is empty only when every machine has left it.
 */
import type { MachineState } from '../../../shared/schemas/machine.js';

export const DRAIN_STEPS = ['stop', 'capture', 'pull', 'make_disk', 'rehome', 'start'] as const;
export type DrainStep = (typeof DRAIN_STEPS)[number];

export type DrainPlan = { kind: 'move'; steps: readonly DrainStep[] } | { kind: 'wait'; reason: string };

const AT_REST: readonly DrainStep[] = ['capture', 'pull', 'make_disk', 'rehome'];

/** For a machine's state, what the drain does with it. */
export const DRAIN_PLANS: Readonly<Record<MachineState, DrainPlan>> = {
  running: { kind: 'move', steps: ['stop', ...AT_REST, 'start'] },
  stopped: { kind: 'move', steps: AT_REST },
  error: { kind: 'move', steps: AT_REST },
  creating: { kind: 'wait', reason: 'the machine is being created: it moves once it is running or stopped' },
  starting: { kind: 'wait', reason: 'the machine is starting: it moves once it is running' },
  stopping: { kind: 'wait', reason: 'the machine is stopping: it moves once it is stopped' },
  deleting: { kind: 'wait', reason: 'the machine is being deleted: the host is empty once it is gone' },
};

/** The internal event types a drain records in a machine's log; never shown to a tenant (only EVENT_TYPES are). */
export const DRAIN_EVENT = {
  planned: 'drain.planned',
  step: 'drain.step',
  waiting: 'drain.waiting',
  failed: 'drain.failed',
  finished: 'drain.finished',
} as const;
export type DrainEventType = (typeof DRAIN_EVENT)[keyof typeof DRAIN_EVENT];

/**
 * Why a move was planned when it is not a drain's (absent: a drain's): `start` — a start of a stopped machine whose
 * host had no room for it, moved to a host with room and started there (services/start-elsewhere.ts).
 */
export type MoveWhy = 'start';

/** The steps of a start's move: the stopped machine's disk moved at rest, then started on its new host. */
export const START_MOVE_STEPS: readonly DrainStep[] = [...AT_REST, 'start'];

/** A recorded drain event, as read back (data parsed and bounded by the store: store/repos/drain.ts). */
export type DrainRecord =
  | { seq: number; type: 'drain.planned'; from: string; to: string; was: MachineState; steps: DrainStep[]; why?: MoveWhy }
  | { seq: number; type: 'drain.step'; from: string; to: string; step: DrainStep; phase: 'begun' | 'done'; bytes: number | null; chain: string | null }
  | { seq: number; type: 'drain.waiting'; from: string; reason: string }
  | { seq: number; type: 'drain.failed'; from: string; to: string; step: DrainStep; code: string; reason: string }
  | { seq: number; type: 'drain.finished'; from: string; to: string; state: MachineState };

/** A machine's move in progress: the recorded plan and what of it is done. */
export interface OpenMove {
  plannedSeq: number;
  /** The plan's `why` (absent: a drain's move). */
  why: MoveWhy | null;
  from: string;
  to: string;
  was: MachineState;
  steps: DrainStep[];
  done: DrainStep[];
  /** The captured chain (the capture step's outcome), once captured. */
  chain: string | null;
  /** The next step to act (null: every step is done; the move is finished next). */
  next: DrainStep | null;
}

/** The open move in a machine's drain records (oldest first), if the newest plan is not finished. */
export function openMove(records: readonly DrainRecord[]): OpenMove | null {
  let at = -1;
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.type === 'drain.finished') return null;
    if (r.type === 'drain.planned') {
      at = i;
      break;
    }
  }
  if (at < 0) return null;
  const plan = records[at] as Extract<DrainRecord, { type: 'drain.planned' }>;
  const done: DrainStep[] = [];
  let chain: string | null = null;
  for (const r of records.slice(at + 1)) {
    if (r.type !== 'drain.step' || r.phase !== 'done' || done.includes(r.step)) continue;
    done.push(r.step);
    if (r.step === 'capture') chain = r.chain;
  }
  return { plannedSeq: plan.seq, why: plan.why ?? null, from: plan.from, to: plan.to, was: plan.was, steps: plan.steps, done, chain, next: plan.steps.find((s) => !done.includes(s)) ?? null };
}

/** The state a machine must be in for a step to be acted (a machine moved by someone else meanwhile is not acted on). */
export function stateForStep(step: DrainStep, was: MachineState): readonly MachineState[] {
  if (step === 'stop') return ['running', 'stopping', 'stopped'];
  if (step === 'start') return ['stopped', 'starting', 'running'];
  return was === 'error' ? ['error'] : ['stopped'];
}

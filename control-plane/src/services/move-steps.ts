/**
 * The drain's move steps as data (docs/operations.md "Draining a host"), and a live fork's capture on its parent's
 * host (services/live-fork.ts): each step's strict body and answer, what it
 * does on a host with that host's acts (services/move-acts.ts), and its path on the internal channel. Shared by the
 * host that serves the steps (internal-moves.ts) and the leader that asks for them (cluster/machine-move.ts), which
 * acts them directly when it drives that host itself.
 */
import { z } from 'zod';
import { parseOrThrow } from '../../../shared/errors.js';
import { idPattern } from '../../../shared/ids.js';
import { LayerId } from '../substrate/disks/transfer/wire.js';
import type { MoveActs } from './move-acts.js';

const HostId = z.string().regex(new RegExp(idPattern('host')));
const MachineId = z.string().regex(new RegExp(idPattern('machine')));
/** A move: its plan's record seq (services/machine-move.ts `MovingMachine.move`). */
const Move = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

type Nothing = Record<string, never>;
/** Each step's body and answer. */
export interface MoveStepShapes {
  stop: { body: Nothing; answer: Nothing };
  capture: { body: { move: number }; answer: { chain: string } };
  pull: { body: { move: number; from: string; chain: string }; answer: { bytes: number } };
  disk: { body: { chain: string }; answer: Nothing };
  start: { body: Nothing; answer: Nothing };
  /** A live fork made on another host: the parent's disk captured here (services/live-fork.ts). */
  fork_capture: { body: { fork: string }; answer: { chain: string } };
  fork_release: { body: { fork: string }; answer: Nothing };
}
export type MoveStep = keyof MoveStepShapes;
export type MoveBody<S extends MoveStep> = MoveStepShapes[S]['body'];
export type MoveAnswer<S extends MoveStep> = MoveStepShapes[S]['answer'];

/** Each step's body, strict: an unknown field is a 400. */
export const MOVE_BODIES: { [S in MoveStep]: z.ZodType<MoveBody<S>> } = {
  stop: z.strictObject({}),
  capture: z.strictObject({ move: Move }),
  pull: z.strictObject({ move: Move, from: HostId, chain: LayerId }),
  disk: z.strictObject({ chain: LayerId }),
  start: z.strictObject({}),
  fork_capture: z.strictObject({ fork: MachineId }),
  fork_release: z.strictObject({ fork: MachineId }),
};

/** Each step's answer, as the calling side parses it (cluster/machine-move.ts). */
export const MOVE_ANSWERS: { [S in MoveStep]: z.ZodType<MoveAnswer<S>> } = {
  stop: z.strictObject({}),
  capture: z.strictObject({ chain: LayerId }),
  pull: z.strictObject({ bytes: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER) }),
  disk: z.strictObject({}),
  start: z.strictObject({}),
  fork_capture: z.strictObject({ chain: LayerId }),
  fork_release: z.strictObject({}),
};

/** What each step does on this host with its checked body (services/move-acts.ts); the calling side's local path too. */
export const MOVE_ACTS: { [S in MoveStep]: (acts: MoveActs, machine: string, body: MoveBody<S>) => Promise<MoveAnswer<S>> } = {
  stop: (a, id) => a.stop(id).then(() => ({})),
  capture: (a, id, b) => a.capture(id, b.move),
  pull: (a, id, b) => a.pull(id, b.move, b.from, b.chain),
  disk: (a, id, b) => a.makeDisk(id, b.chain).then(() => ({})),
  start: (a, id) => a.start(id).then(() => ({})),
  fork_capture: (a, id, b) => a.forkCapture(id, b.fork),
  fork_release: (a, _id, b) => a.forkRelease(b.fork).then(() => ({})),
};

/** `step` of `machine` with `body` checked first (a 400 acts nothing), acted with `acts`. */
export function actStep<S extends MoveStep>(acts: MoveActs, machine: string, step: S, body: unknown): Promise<MoveAnswer<S>> {
  const schema: z.ZodType<MoveBody<S>> = MOVE_BODIES[step];
  return MOVE_ACTS[step](acts, machine, parseOrThrow(schema, body));
}

/** The path of `step` for `machine` (the calling side builds it so). */
export const movePath = (machine: string, step: MoveStep): string => `/internal/moves/${machine}/${step}`;

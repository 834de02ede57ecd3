/**
 * The drain's seam to the substrates (services/drain.ts): the acts that move one machine's disk from a source host to
 * a target host. The drain records each step before and after calling it; a step begun and not recorded done (a
 * killed leader) is called again, so every method must be idempotent (a stop of a stopped machine, a pull of a chain
 * already there, a disk already made: each succeeds and changes nothing).
 *
 * The real implementation composes the internal channel (cluster/forward/: a call to the host's own process, which
 * acts on its substrate) and the layer pull between hosts (issue 25 item 4): stop and capture on the source's driver,
 * pull, make disk and start on the target's. Until it is plugged in (cluster/jobs.ts `JobOptions.machineMove`),
 * `NOT_BUILT` is never `ready` (a 503), so the drain plans nothing and waits, saying why: no machine is stopped.
 */
import { ERRORS } from '../errors.js';

/** The machine being moved, as the seam needs it (never its agent token). */
export interface MovingMachine {
  id: string;
  size: string;
  /** The move: its plan's record seq (drain.planned), which names the pins the move takes on each host. */
  move: number;
}

export interface MachineMove {
  /**
   * Resolves when moves can run now; throws (an AppError, its message an operator's reason) when they cannot. Asked
   * before a move is planned, so a machine is never stopped for a move that cannot happen.
   */
  ready(): Promise<void>;
  /** Stops the machine's guest on `from` (its disk stays). */
  stop(m: MovingMachine, from: string): Promise<void>;
  /** Captures the machine's disk in place on `from`; a reference to the chain to pull (bounded, no host path). */
  capture(m: MovingMachine, from: string): Promise<{ chain: string }>;
  /** Brings `chain` from `from` to `to`; the bytes moved (0: already there). */
  pull(m: MovingMachine, chain: string, from: string, to: string): Promise<{ bytes: number }>;
  /** Makes the machine's disk on `to` from the pulled chain. */
  makeDisk(m: MovingMachine, chain: string, to: string): Promise<void>;
  /** Starts the machine on `to`. */
  start(m: MovingMachine, to: string): Promise<void>;
}

const notBuilt = async (): Promise<never> => {
  throw ERRORS.machineMoveNotBuilt();
};

/** Nothing plugged in: every step is refused (503), so the drain waits with the reason. */
export const NOT_BUILT: MachineMove = { ready: notBuilt, stop: notBuilt, capture: notBuilt, pull: notBuilt, makeDisk: notBuilt, start: notBuilt };

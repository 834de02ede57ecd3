/**
 * The typing deadline (docs/agent-desktop.md, "Typing deadline"): a keyboard.type call is estimated
 * before any key is sent, from a dry run of its key bindings, and refused when typing plus settling would
 * exceed TYPE_DEADLINE_MS. A call that is accepted is carried out whole: nothing cancels it once started.
 */
import { AppError } from '../../../shared/errors.js';
import { TYPE_DEADLINE_MS } from '../../../shared/schemas/input.js';
import { ERRORS } from '../errors.js';

/**
 * Time per keystroke through xdotool, with room for a loaded machine: measured 0.15 ms (0.3 ms with
 * Shift) on the 2-core development host.
 */
export const STROKE_MS = 0.5;

/** What a dry run of a text's key bindings found (KeycodeResolver.costOf). */
export interface TypingCost {
  /** Keystrokes to send. */
  strokes: number;
  /** Waits the bindings need: new bindings settling, recycled keycodes left alone for a while. */
  waitMs: number;
}

/** Estimated duration of a type call in milliseconds. */
export function typingEstimateMs(cost: TypingCost, delayMs: number, settleTimeoutMs: number): number {
  return Math.ceil(cost.strokes * (STROKE_MS + delayMs) + cost.waitMs + settleTimeoutMs);
}

/** The refusal for a call estimated at `estimateMs`, or null when it fits the deadline. */
export function typingRefusal(estimateMs: number, delayMs: number): AppError | null {
  if (estimateMs <= TYPE_DEADLINE_MS) return null;
  const s = Math.ceil(estimateMs / 1000);
  return ERRORS.typingTooLong(s, TYPE_DEADLINE_MS / 1000, delayMs > 0 ? ' or with a smaller delay_ms' : '', [{ field: delayMs > 0 ? 'delay_ms' : 'text', message: `needs about ${s} s to type, more than ${TYPE_DEADLINE_MS / 1000} s` }]);
}

/**
 * Typing a stored secret by reference, and keeping its value out of every answer: the rule the `/v1`
 * keyboard route and the gateway's input channel share.
 */
import { AppError } from '../../../../shared/errors.js';
import type { KeyboardTypeRequest } from '../../../../shared/schemas/input.js';

/**
 * The agent's `keyboard.type` body for a request naming `secret`, or null when it types its own text.
 * The stored value goes from storage to the machine's keyboard and nowhere else; settling works by
 * reference too, but without the after-screenshot (the field the secret was typed into may show it).
 * An unknown secret throws `valueOf`'s AppError.
 */
export function secretTypingBody(req: KeyboardTypeRequest, valueOf: (name: string) => string): string | null {
  if (req.secret === undefined) return null;
  return JSON.stringify({
    text: valueOf(req.secret),
    delay_ms: req.delay_ms,
    settle: req.settle ? { ...req.settle, screenshot: undefined } : undefined,
  });
}

/**
 * An agent's refusal of a body that held a secret, as the caller may see it: its code and a fixed
 * `message`, no details, so not even a hostile guest can echo the value back.
 */
export function redacted(e: unknown, message: string): AppError {
  const err = e instanceof AppError ? e : new AppError('compute_unavailable', message);
  return new AppError(err.code, message, { headers: err.headers });
}

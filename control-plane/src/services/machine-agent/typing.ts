/**
 * Typing a stored secret by reference: the rule the `/v1` keyboard route and the gateway's input channel
 * share. Keeping its value out of every answer is `ERRORS.redacted` (errors.ts).
 */
import type { KeyboardTypeRequest } from '../../../../shared/schemas/input.js';

/**
 * The agent's `keyboard.type` body for a request naming `secret`, or null when it types its own text.
 * The stored value goes from storage to the machine's keyboard and nowhere else; settling works by
 * reference too, but without the after-screenshot (the field the secret was typed into may show it).
 * An unknown secret throws `valueOf`'s AppError.
 */
export async function secretTypingBody(req: KeyboardTypeRequest, valueOf: (name: string) => Promise<string>): Promise<string | null> {
  if (req.secret === undefined) return null;
  return JSON.stringify({
    text: await valueOf(req.secret),
    delay_ms: req.delay_ms,
    settle: req.settle ? { ...req.settle, screenshot: undefined } : undefined,
  });
}

import type { Context } from 'hono';
import { AppError, errorBody, isAppError } from '../../../shared/errors.js';
import type { LogSink } from './log.js';
import { ERRORS } from '../errors.js';

export const REQUEST_ID_HEADER = 'x-request-id';

export function requestIdOf(c: Context): string {
  return (c.get('requestId' as never) as string | undefined) ?? 'unknown';
}

/** The one place an error becomes a response. Causes are logged by kind only: messages can hold paths. */
export function renderError(err: unknown, c: Context, log: LogSink): Response {
  const appErr = isAppError(err) ? err : toAppError(err);
  if (!isAppError(err)) {
    const kind = (err as { code?: unknown })?.code ?? (err as Error)?.name ?? 'unknown';
    log({ event: 'internal_error', kind: String(kind) });
  }
  const body = errorBody(appErr, requestIdOf(c));
  return c.json(body, appErr.status as 400, appErr.headers);
}

function toAppError(err: unknown): AppError {
  // Hono's own HTTPException (e.g. body-limit) carries a status; map it onto our vocabulary.
  const status = (err as { status?: unknown })?.status;
  if (status === 413) return ERRORS.bodyTooLarge();
  return ERRORS.agentFailed(err);
}

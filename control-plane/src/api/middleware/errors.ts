import type { Context } from 'hono';
import { AppError, errorBody, isAppError } from '../../../../shared/errors.js';
import type { CpEnv } from '../../context.js';
import type { LogSink } from '../../log.js';

/**
 * The one place an error becomes a response. An unexpected error is logged with its cause (for the
 * operator) and answered with a generic 500 (the client never sees the cause).
 */
export function renderError(err: unknown, c: Context<CpEnv>, log: LogSink): Response {
  let appErr: AppError;
  if (isAppError(err)) appErr = err;
  else if ((err as { status?: unknown })?.status === 413) appErr = new AppError('invalid_request', 'Request body is too large.');
  else {
    const e = err as Error;
    log({
      event: 'internal_error',
      request_id: c.get('requestId') ?? null,
      operation: c.get('operation') ?? null,
      cause: `${e?.name ?? 'Error'}: ${e?.message ?? String(err)}`,
      stack: typeof e?.stack === 'string' ? e.stack : null,
    });
    appErr = new AppError('internal_error', 'The control plane failed to handle the request.');
  }
  const body = errorBody(appErr, c.get('requestId') ?? 'unknown');
  return c.json(body, appErr.status as 400, appErr.headers);
}

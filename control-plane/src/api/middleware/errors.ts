import type { Context } from 'hono';
import { AppError, errorBody, isAppError } from '../../../../shared/errors.js';
import type { CpEnv } from '../../context.js';
import { causeChain, type LogSink } from '../../log.js';
import { ERRORS } from '../../errors.js';

/**
 * The one place an error becomes a response. An unexpected error is logged with its cause (for the
 * operator) and answered with a generic 500 (the client never sees the cause).
 */
export function renderError(err: unknown, c: Context<CpEnv>, log: LogSink): Response {
  let appErr: AppError;
  if (isAppError(err)) appErr = err;
  else if ((err as { status?: unknown })?.status === 413) appErr = ERRORS.bodyTooLarge();
  else if (isDiskFull(err)) {
    // A full disk under DATA_DIR (SQLite cannot grow its journal, a file cannot be written) passes once space is
    // freed: a retryable 503, not a 500.
    log({ event: 'disk_full', request_id: c.get('requestId') ?? null, operation: c.get('operation') ?? null, cause: causeChain(err) });
    appErr = ERRORS.serverOutOfDisk();
  }
  else {
    const e = err as Error;
    log({
      event: 'internal_error',
      request_id: c.get('requestId') ?? null,
      operation: c.get('operation') ?? null,
      cause: `${e?.name ?? 'Error'}: ${e?.message ?? String(err)}`,
      stack: typeof e?.stack === 'string' ? e.stack : null,
    });
    appErr = ERRORS.controlPlaneFailed();
  }
  const body = errorBody(appErr, c.get('requestId') ?? 'unknown');
  return c.json(body, appErr.status as 400, appErr.headers);
}

/** SQLITE_FULL from better-sqlite3, ENOSPC / EDQUOT from the file system, at any depth of the cause chain. */
export function isDiskFull(err: unknown): boolean {
  let cur: unknown = err;
  for (let i = 0; i < 6 && cur && typeof cur === 'object'; i++) {
    const code = (cur as { code?: unknown }).code;
    if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return true;
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}

import type { MiddlewareHandler } from 'hono';
import { newId } from '../../../../shared/ids.js';
import type { CpEnv } from '../../context.js';
import type { LogSink } from '../../log.js';

export const REQUEST_ID_HEADER = 'x-request-id';

/** The machine a /v1/machines/{id}/… request names, when it has the shape of one (never raw input in a log). */
export function machineIdOf(p: string): string | null {
  return /^\/v1\/machines\/(mch_[0-9a-z]{24})(?:\/|$)/.exec(p)?.[1] ?? null;
}

/**
 * Gives every request an id (echoed in `x-request-id` and in every error body) and writes one log
 * line when it ends: id, operation, organization, machine, method, status, duration. Nothing else.
 */
export function requestContext(log: LogSink): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const started = performance.now();
    // A request forwarded by another process keeps the id its caller sees (cluster/forward/assertion.ts).
    const id = c.env?.forwarded?.request_id ?? newId('request');
    c.set('requestId', id);
    c.set('operation', 'unmatched');
    try {
      await next();
    } finally {
      c.res.headers.set(REQUEST_ID_HEADER, id);
      log({
        event: 'request',
        request_id: id,
        operation: c.get('operation'),
        org: c.get('principal')?.org_id ?? null,
        machine_id: machineIdOf(c.req.path),
        method: c.req.method,
        status: c.res.status,
        ...(c.get('forwardedTo') ? { forwarded_to: c.get('forwardedTo') } : {}),
        ms: Math.round((performance.now() - started) * 10) / 10,
      });
    }
  };
}

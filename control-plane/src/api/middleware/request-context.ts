import type { MiddlewareHandler } from 'hono';
import { newId } from '../../../../shared/ids.js';
import type { CpEnv } from '../../context.js';
import type { LogLine, LogSink } from '../../log.js';

export const REQUEST_ID_HEADER = 'x-request-id';

/** The machine a /v1/machines/{id}/… request names, when it has the shape of one (never raw input in a log). */
export function machineIdOf(p: string): string | null {
  return /^\/v1\/machines\/(mch_[0-9a-z]{24})(?:\/|$)/.exec(p)?.[1] ?? null;
}

/**
 * Requests whose id was given before the app saw them: the short way in (api/forward-front.ts) hands the app a request
 * it already tried to forward, and its id (the one the remembered driver logged its refusal under) stays the request's.
 */
const begun = new WeakMap<object, string>();

export function beginRequest(incoming: object, id: string): void {
  begun.set(incoming, id);
}

/** The one log line of a request (also written by the short way in, api/forward-front.ts): ids, never raw input. */
export function requestLine(r: {
  requestId: string; operation: string; org: string | null; path: string; method: string; status: number;
  forwardedTo?: string | undefined; via?: 'front'; started: number;
}): LogLine {
  return {
    event: 'request',
    request_id: r.requestId,
    operation: r.operation,
    org: r.org,
    machine_id: machineIdOf(r.path),
    method: r.method,
    status: r.status,
    ...(r.forwardedTo ? { forwarded_to: r.forwardedTo } : {}),
    ...(r.via ? { via: r.via } : {}),
    ms: Math.round((performance.now() - r.started) * 10) / 10,
  };
}

/**
 * Gives every request an id (echoed in `x-request-id` and in every error body) and writes one log
 * line when it ends: id, operation, organization, machine, method, status, duration. Nothing else.
 */
export function requestContext(log: LogSink): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const started = performance.now();
    // A request forwarded by another process keeps the id its caller sees (cluster/forward/assertion.ts).
    const id = c.env?.forwarded?.request_id ?? (c.env?.incoming ? begun.get(c.env.incoming) : undefined) ?? newId('request');
    c.set('requestId', id);
    c.set('operation', 'unmatched');
    try {
      await next();
    } finally {
      c.res.headers.set(REQUEST_ID_HEADER, id);
      log(requestLine({
        requestId: id, operation: c.get('operation'), org: c.get('principal')?.org_id ?? null, path: c.req.path,
        method: c.req.method, status: c.res.status, forwardedTo: c.get('forwardedTo'), started,
      }));
    }
  };
}

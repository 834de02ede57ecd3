/**
 * The internal listener's one set of host handlers (cluster/forward/listener.ts `hostHandlers`): host-to-host calls
 * routed by path to the layer routes (internal-layers.ts) or the move routes (internal-moves.ts). A path under
 * neither, or a part this process does not serve, is 404 `noSuchHostCall`.
 */
import type { ServerResponse } from 'node:http';
import { AppError } from '../../shared/errors.js';
import { sendError } from './cluster/forward/envelope.js';
import type { HostCall, HostHandlers } from './cluster/forward/listener.js';
import { ERRORS } from './errors.js';
import { causeChain, type LogSink } from './log.js';

/**
 * How a host route answers a failure: an AppError as it is, anything else as `controlPlaneFailed` with its cause in
 * the operator's log line `event` (never in the answer).
 */
export function hostCallRefusal(log: LogSink, event: string) {
  return (res: ServerResponse, c: HostCall, e: unknown): void => {
    if (!(e instanceof AppError)) log({ event, sender: c.sender, cause: causeChain(e) });
    sendError(res, e instanceof AppError ? e : ERRORS.controlPlaneFailed(), c.request_id);
  };
}

/** A host route's 200 JSON answer. */
export function sendJson(res: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

export interface HostParts {
  /** `/internal/layers/…`: layerHostHandlers over the substrate's layer source. */
  layers?: HostHandlers | null;
  /** `/internal/moves/…`: moveHostHandlers over this host's move acts. */
  moves?: HostHandlers | null;
}

/** Which part a path belongs to (pure). */
export function hostPartOf(url: string | undefined): keyof HostParts | null {
  const path = (url ?? '').split('?')[0]!;
  if (path.startsWith('/internal/layers/')) return 'layers';
  if (path.startsWith('/internal/moves/')) return 'moves';
  return null;
}

export function hostRouter(parts: HostParts): HostHandlers {
  return {
    request(req, res, c) {
      const part = hostPartOf(req.url);
      const handlers = part ? parts[part] : null;
      if (handlers) return handlers.request(req, res, c);
      req.resume();
      sendError(res, ERRORS.noSuchHostCall(), c.request_id);
    },
  };
}

/**
 * One plain HTTP request through the channel, streamed both ways: the caller's body is piped to the owner as it
 * arrives and the owner's answer piped back (status, headers minus hop-by-hop ones, body), so neither is ever
 * held whole and each side's backpressure reaches the other. An owner that cannot be reached before it answered
 * is a 503 envelope with its Retry-After; one that fails mid-answer cuts the caller's connection (a truncated
 * answer is never passed off as whole). A caller that goes away ends the owner's request.
 *
 * A pooled connection the owner closed just as it was reused fails with nothing sent; a request without a body
 * is then tried once more on a fresh one (one with a body may have been partly consumed, so it is not).
 *
 * With `settle` (a forward to an owner the sender remembered, cluster/owner-cache.ts, its body replayable), an owner
 * that refused before acting — its answer marked `OWNER_REFUSED_HEADER` — or that could not be reached before it
 * answered is `refused`: nothing is sent to the caller, and the sender routes the request again. Anything else
 * is `answered` (the caller has the owner's answer, or its 503).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { ERRORS } from '../../errors.js';
import { sendError } from './envelope.js';
import type { Dial, ForwardCall } from './call.js';
import { OWNER_REFUSED_HEADER, responseHeadersForCaller } from './headers.js';

/** How a forward ended for its sender (see the header). */
export type Settled = 'answered' | 'refused';

/**
 * The owner's answer streamed to the caller, with each side's backpressure (`pipe`); an answer that ends before it is
 * whole (the owner's connection failed) cuts the caller's connection. Not `stream.pipeline`: it arms an abort signal
 * per call, and aborting it at the end builds a DOMException with its stack, on every forwarded request.
 */
function relay(answer: IncomingMessage, res: ServerResponse): void {
  answer.on('error', () => res.destroy());
  answer.once('close', () => {
    if (!answer.complete) res.destroy();
  });
  answer.pipe(res);
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
}

/**
 * `source`: where the body is read from (default the caller's request), or the body itself when the sender already
 * holds it (a replayable one, owner-route.ts and api/forward-front.ts), written whole with the request's end.
 */
export function forwardRequest(
  dial: Dial, req: IncomingMessage, res: ServerResponse, call: ForwardCall, failed: (e: unknown) => void, source: Readable | Buffer = req, settle?: (s: Settled) => void,
): void {
  const body = hasBody(req);
  let retried = false;
  let current: ReturnType<Dial> | null = null;
  const unreachable = (e: unknown) => {
    failed(e);
    if (settle && !res.headersSent && !res.destroyed) {
      settle('refused');
      return;
    }
    if (!res.headersSent) sendError(res, ERRORS.machineOwnerUnreachable(), call.assertion.request_id);
    else res.destroy();
    settle?.('answered');
  };
  const attempt = () => {
    let up: ReturnType<Dial>;
    try {
      up = dial(req, call, false);
    } catch (e) {
      unreachable(e);
      return;
    }
    current = up;
    up.on('response', (answer) => {
      if (settle && answer.statusCode === 503 && answer.headers[OWNER_REFUSED_HEADER] !== undefined) {
        answer.resume();
        settle('refused');
        return;
      }
      settle?.('answered');
      res.writeHead(answer.statusCode ?? 502, responseHeadersForCaller(answer.rawHeaders));
      relay(answer, res);
    });
    up.on('error', (e) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (!body && !retried && up.reusedSocket && !res.destroyed) {
        retried = true;
        attempt();
        return;
      }
      unreachable(e);
    });
    if (!body) up.end();
    else if (Buffer.isBuffer(source)) up.end(source);
    else source.pipe(up);
  };
  res.on('close', () => {
    if (!res.writableFinished) current?.destroy();
  });
  attempt();
}

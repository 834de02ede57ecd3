/**
 * One plain HTTP request through the channel, streamed both ways: the caller's body is piped to the owner as it
 * arrives and the owner's answer piped back (status, headers minus hop-by-hop ones, body), so neither is ever
 * held whole and each side's backpressure reaches the other. An owner that cannot be reached before it answered
 * is a 503 envelope with its Retry-After; one that fails mid-answer cuts the caller's connection (a truncated
 * answer is never passed off as whole). A caller that goes away ends the owner's request.
 *
 * A pooled connection the owner closed just as it was reused fails with nothing sent; a request without a body
 * is then tried once more on a fresh one (one with a body may have been partly consumed, so it is not).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import { ERRORS } from '../../errors.js';
import { sendError } from './envelope.js';
import type { Dial, ForwardCall } from './call.js';
import { responseHeadersForCaller } from './headers.js';

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
}

export function forwardRequest(dial: Dial, req: IncomingMessage, res: ServerResponse, call: ForwardCall, failed: (e: unknown) => void, source: Readable = req): void {
  const body = hasBody(req);
  let retried = false;
  let current: ReturnType<Dial> | null = null;
  const unreachable = (e: unknown) => {
    failed(e);
    if (!res.headersSent) sendError(res, ERRORS.machineOwnerUnreachable(), call.assertion.request_id);
    else res.destroy();
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
      res.writeHead(answer.statusCode ?? 502, responseHeadersForCaller(answer.rawHeaders));
      pipeline(answer, res, () => {});
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
    if (body) source.pipe(up);
    else up.end();
  };
  res.on('close', () => {
    if (!res.writableFinished) current?.destroy();
  });
  attempt();
}

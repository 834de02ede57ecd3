/**
 * One request that never had a socket of its own — a /v1 request the MCP endpoint dispatches inside the process
 * (mcp/caller.ts) — sent through the channel as a web `Request` and answered as a web `Response`, the body streamed
 * both ways (the owner's answer is handed on as it arrives, never held whole). The same signing, headers and
 * credential rule as forward-request.ts; the caller gets a rejection when the owner cannot be reached or fails
 * before it answered.
 */
import { Readable } from 'node:stream';
import type { Dial, ForwardCall } from './call.js';
import { responseHeadersForCaller } from './headers.js';

/** Statuses whose answer has no body (a Response refuses one). */
const NO_BODY = new Set([101, 204, 205, 304]);

export function forwardFetch(dial: Dial, request: Request, call: ForwardCall): Promise<Response> {
  const u = new URL(request.url);
  const rawHeaders = [...request.headers].flat();
  return new Promise<Response>((resolve, reject) => {
    const up = dial({ method: request.method, url: u.pathname + u.search, rawHeaders }, call, false);
    up.once('response', (answer) => {
      const headers = new Headers();
      const list = responseHeadersForCaller(answer.rawHeaders);
      for (let i = 0; i + 1 < list.length; i += 2) headers.append(list[i]!, list[i + 1]!);
      const status = answer.statusCode ?? 502;
      const empty = NO_BODY.has(status) || request.method === 'HEAD';
      if (empty) answer.resume();
      resolve(new Response(empty ? null : Readable.toWeb(answer), { status, headers }));
    });
    up.once('error', reject);
    if (request.body) Readable.fromWeb(request.body).pipe(up);
    else up.end();
  });
}

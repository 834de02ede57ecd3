/**
 * One proxied HTTP request: admitted, given a connection slot, dialed, then one exchange with the guest
 * (guest-exchange.ts) whose answer streams to the client while the client's body streams to the guest.
 */
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import http2 from 'node:http2';
import { PREVIEW_ACCESS_PATH } from '../../../shared/schemas/ports.js';
import { responseHeadersFromGuest } from '../domain/preview-headers.js';
import type { PreviewRow } from '../store/repos/previews.js';
import { access, admit, lookup } from './authorize.js';
import type { ForwardedVisitor, ProxyContext } from './deps.js';
import { dial, guestHead, visitorOf, type Visitor } from './dial.js';
import { countResponseHead } from './egress.js';
import { forwardedPreview, previewRoute } from './forward.js';
import { startExchange } from './guest-exchange.js';
import { chunkOf, LAST_CHUNK, type BodyFraming } from './guest-request.js';
import { BUSY, NO_ANSWER, sendPage } from './refusals.js';

/**
 * The client's request body after the head, framed as it came (a chunked body re-chunked), with
 * backpressure. Once the guest's side is gone (it answered early, or failed) the rest is read and dropped,
 * so the client's upload completes instead of stalling its connection.
 */
function sendBody(req: IncomingMessage, stream: http2.ClientHttp2Stream, framing: BodyFraming): void {
  if (framing === 'none') return;
  req.on('data', (c: Buffer) => {
    if (!c.length || stream.destroyed || stream.writableEnded) return;
    if (!stream.write(framing === 'chunked' ? chunkOf(c) : c)) req.pause();
  });
  stream.on('drain', () => req.resume());
  stream.once('close', () => req.resume());
  req.on('end', () => {
    if (framing === 'chunked' && stream.writable) stream.write(LAST_CHUNK);
  });
}

/** Serves one request that arrived here; resolves to the status the client got (for the request log). */
export async function serveRequest(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, requestId: string): Promise<number> {
  const { deps } = ctx;
  const { ports } = deps;
  const accept = req.headers.accept;
  const found = await lookup(ports, req);
  // The access link is the one way in without a credential (private previews only); traded where it arrived.
  if (found?.access === 'private' && new URL(req.url ?? '/', 'http://preview').pathname === PREVIEW_ACCESS_PATH) {
    return access(ports, deps.secureCookies, req, res, found, requestId);
  }
  const a = await admit(ports, req);
  if ('err' in a) return sendPage(res, a, requestId, accept);
  const where = await previewRoute(deps, req, a.row, 'tenant', { dropAuthorization: a.dropAuthorization, requestId });
  if ('err' in where) return sendPage(res, where, requestId, accept);
  if (where.kind === 'forward') {
    deps.forwarding?.forwarder.request(req, res, where.call);
    await once(res, 'close');
    return res.statusCode;
  }
  return exchange(ctx, req, res, requestId, a.row, { dropAuthorization: a.dropAuthorization, visitor: visitorOf(deps, req) });
}

/**
 * Serves one request another process admitted (and traded the access link for) and forwarded: no credential is
 * checked here, the signed assertion names the preview; a preview unpublished meanwhile is not found.
 */
export async function serveForwardedRequest(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, v: ForwardedVisitor): Promise<number> {
  const found = await forwardedPreview(ctx.deps, req, v);
  if ('err' in found) return sendPage(res, found, v.requestId, req.headers.accept);
  // The forwarder already dropped the preview's own secret: an Authorization that crossed is the guest app's.
  return exchange(ctx, req, res, v.requestId, found.row, { dropAuthorization: false, visitor: v.client });
}

/** One admitted request served by this process: a connection slot, the agent stream, the exchange with the guest. */
async function exchange(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  row: PreviewRow,
  o: { dropAuthorization: boolean; visitor: Visitor },
): Promise<number> {
  const { deps, admission, connections, headerTimeoutMs } = ctx;
  const accept = req.headers.accept;
  const { head, framing } = guestHead(req, false, o.dropAuthorization, o.visitor);
  deps.ports.touch(row.id);
  const slot = admission.acquire(row.machine_id);
  if ('refused' in slot) return sendPage(res, BUSY[slot.refused](), requestId, accept);
  res.once('close', slot.release);
  let gone = false;
  res.once('close', () => (gone = true));
  const d = await dial(deps, row);
  if ('err' in d) return sendPage(res, d, requestId, accept);
  const { stream, machineId } = d;
  stream.on('error', () => {});
  // The client left while the stream was opening: nothing will close it later.
  if (gone) {
    stream.close(http2.constants.NGHTTP2_CANCEL);
    return 0;
  }
  res.once('close', connections.meter(stream, res, req));

  return new Promise<number>((resolve) => {
    let status = 0;
    const untrack = connections.track(row.id, () => {
      res.destroy();
      ex.cancel();
    });
    const ex = startExchange(stream, { head, method: req.method ?? 'GET', upgrade: false, headerTimeoutMs }, {
      head: (h) => {
        // The guest's head is untrusted: a status or header Node will not send is the unavailable page,
        // never a throw out of this handler (which would take the control plane down).
        try {
          res.writeHead(h.status, h.reason || undefined, responseHeadersFromGuest(h.rawHeaders));
        } catch {
          status = sendPage(res, NO_ANSWER(), requestId, accept);
          ex.cancel();
          return;
        }
        status = h.status;
        // Headers go out now: an event stream's client learns it is connected before the first event.
        res.flushHeaders();
        countResponseHead(deps.egress, machineId, res);
      },
      body: (data) => {
        deps.egress.add(machineId, data.length);
        return res.write(data);
      },
      end: () => res.end(),
      fail: () => {
        status = sendPage(res, NO_ANSWER(), requestId, accept);
      },
    });
    res.on('drain', () => ex.resume());
    res.on('close', () => {
      untrack();
      ex.cancel();
      resolve(status || 503);
    });
    sendBody(req, stream, framing);
  });
}

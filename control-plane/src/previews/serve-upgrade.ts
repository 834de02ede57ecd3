/**
 * One proxied WebSocket (any Upgrade) handshake: admitted, given a connection slot, dialed; the guest's 101
 * turns the connection into a raw byte pipe, any other answer is relayed and the connection closed.
 */
import type { IncomingMessage } from 'node:http';
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { responseHeadersFromGuest } from '../domain/preview-headers.js';
import type { PreviewRow } from '../store/repos/previews.js';
import { admit } from './authorize.js';
import type { ForwardedVisitor, ProxyContext } from './deps.js';
import { dial, guestHead, visitorOf, type Visitor } from './dial.js';
import { forwardedPreview, previewRoute } from './forward.js';
import { startExchange } from './guest-exchange.js';
import { BUSY, NO_ANSWER, pairs, rawResponse, writeRawPage } from './refusals.js';

/** One handshake that arrived here: admitted, then served here or forwarded to the machine's owner. */
export async function serveUpgrade(ctx: ProxyContext, req: IncomingMessage, socket: Duplex, early: Buffer, requestId: string): Promise<void> {
  const { deps } = ctx;
  const accept = req.headers.accept;
  const a = await admit(deps.ports, req);
  if ('err' in a) return writeRawPage(socket, a, requestId, accept);
  const where = await previewRoute(deps, req, a.row, 'tenant', { dropAuthorization: a.dropAuthorization, requestId });
  if ('err' in where) return writeRawPage(socket, where, requestId, accept);
  if (where.kind === 'forward') return deps.forwarding?.forwarder.upgrade(req, socket, early, where.call);
  return exchangeUpgrade(ctx, req, socket, early, requestId, a.row, { dropAuthorization: a.dropAuthorization, visitor: visitorOf(deps, req) });
}

/** One handshake another process admitted and forwarded (serve-request.ts `serveForwardedRequest` says how). */
export async function serveForwardedUpgrade(ctx: ProxyContext, req: IncomingMessage, socket: Duplex, early: Buffer, v: ForwardedVisitor): Promise<void> {
  const found = await forwardedPreview(ctx.deps, req, v);
  if ('err' in found) return writeRawPage(socket, found, v.requestId, req.headers.accept);
  return exchangeUpgrade(ctx, req, socket, early, v.requestId, found.row, { dropAuthorization: false, visitor: v.client });
}

async function exchangeUpgrade(
  ctx: ProxyContext,
  req: IncomingMessage,
  socket: Duplex,
  early: Buffer,
  requestId: string,
  row: PreviewRow,
  o: { dropAuthorization: boolean; visitor: Visitor },
): Promise<void> {
  const { deps, admission, connections, headerTimeoutMs, log } = ctx;
  const accept = req.headers.accept;
  const { head } = guestHead(req, true, o.dropAuthorization, o.visitor);
  deps.ports.touch(row.id);
  const slot = admission.acquire(row.machine_id);
  if ('refused' in slot) return writeRawPage(socket, BUSY[slot.refused](), requestId, accept);
  socket.once('close', slot.release);
  const d = await dial(deps, row);
  if ('err' in d) return writeRawPage(socket, d, requestId, accept);
  const { stream, machineId } = d;
  stream.on('error', () => {});
  if (socket.destroyed) return void stream.close(http2.constants.NGHTTP2_CANCEL);
  socket.once('close', connections.meter(stream, socket, socket));
  let answered = false;
  const untrack = connections.track(row.id, () => {
    socket.destroy();
    ex.cancel();
  });
  const ex = startExchange(stream, { head, method: req.method ?? 'GET', upgrade: true, headerTimeoutMs }, {
    head: (h, upgraded) => {
      answered = true;
      log({ event: 'preview_upgrade', request_id: requestId, status: h.status });
      if (upgraded) {
        const switched = rawResponse(101, h.reason || 'Switching Protocols', pairs(responseHeadersFromGuest(h.rawHeaders, true)));
        deps.egress.add(machineId, Buffer.byteLength(switched));
        socket.write(switched);
        if (early.length) stream.write(early);
        socket.on('data', (c: Buffer) => {
          if (!stream.write(c)) socket.pause();
        });
        stream.on('drain', () => socket.resume());
        socket.on('end', () => stream.end());
        return;
      }
      // The guest answered the handshake without switching: relay that answer, then close.
      const hs = pairs(responseHeadersFromGuest(h.rawHeaders)).filter(([k]) => k.toLowerCase() !== 'content-length');
      const answer = rawResponse(h.status, h.reason || 'Error', [...hs, ['connection', 'close']]);
      deps.egress.add(machineId, Buffer.byteLength(answer));
      socket.write(answer);
    },
    body: (data) => {
      deps.egress.add(machineId, data.length);
      return socket.write(data);
    },
    end: () => socket.end(),
    fail: () => {
      if (answered) socket.destroy();
      else writeRawPage(socket, NO_ANSWER(), requestId, accept);
    },
  });
  socket.on('drain', () => ex.resume());
  socket.once('close', () => {
    untrack();
    ex.cancel();
  });
}

/**
 * The preview proxy: requests whose Host is `prv-<…>.<preview domain>` are served here, on the API's
 * listener, and reach the published port through the agent channel only. Each incoming request (or
 * WebSocket handshake) gets one agent TCP stream (`POST /tcp/:port/connect`) to 127.0.0.1:port in the
 * guest. The request head is serialized here and written to the stream as bytes, then the body
 * (guest-request.ts: Node's http client over an Http2Stream leaked freed heap into small requests); the
 * answer is parsed strictly and bounded (guest-response.ts), so bodies stream both ways, server-sent
 * events pass unbuffered and upgrades become a raw byte pipe. Unpublishing cuts every open connection of
 * the preview at once. The guest's bytes are untrusted, and its answer's head has a deadline.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { newId } from '../../../shared/ids.js';
import { PREVIEW_ACCESS_PATH, PREVIEW_COOKIE } from '../../../shared/schemas/ports.js';
import type { EgressMeter } from '../gateway/deps.js';
import { streamRequest, type AgentTarget, type OpenedStream, type StreamRequest } from '../services/machine-agent/index.js';
import type { LogSink } from '../log.js';
import type { PortService } from '../services/ports.js';
import type { PreviewRow } from '../store/repos/previews.js';
import { PreviewAdmission, type AdmissionRefusal, type PreviewAdmissionLimits } from './admission.js';
import { countResponseHead } from './egress.js';
import { startExchange } from './guest-exchange.js';
import { chunkOf, framingOf, LAST_CHUNK, requestHead, type BodyFraming } from './guest-request.js';
import { requestHeadersForGuest, responseHeadersFromGuest } from '../domain/preview-headers.js';
import { isPreviewHost, previewIdFromHost } from '../domain/preview-hostnames.js';
import { previewPage, type PreviewPage } from './pages.js';

export interface PreviewProxyDeps {
  ports: PortService;
  /** The running machine's agent; throws AppError when it is not running. */
  agentTarget(orgId: string, machineId: string): AgentTarget;
  /** Opens an agent stream (the machine-agent service's streams). */
  openStream(target: AgentTarget, req: StreamRequest): Promise<OpenedStream>;
  /**
   * Where bytes served to preview clients are counted, per machine (egress_bytes). main.ts passes the
   * gateway's EgressCounter, so the metering flush sees one figure per machine.
   */
  egress: EgressMeter;
  /** Set the cookie's Secure attribute (the public URL is https). */
  secureCookies: boolean;
  /** Take the client address from X-Forwarded-For's right-most entry (TRUST_PROXY). */
  trustProxy: boolean;
  log?: LogSink;
  /** Deadline for the guest's response headers (default 100 s, as common TLS proxies use). */
  headerTimeoutMs?: number;
  /** Open connections per machine and the global byte budget (admission.ts; defaults there). */
  limits?: PreviewAdmissionLimits;
}

export interface PreviewProxy {
  /** Is this request for a preview hostname (then the API and the gateway must leave it alone)? */
  owns(req: IncomingMessage): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Open proxied connections (tests, metrics). */
  openConnections(): number;
  /**
   * Bytes the open connections hold in the control plane now, measured: what the agent streams received
   * and nobody has read yet, what waits to go to them, and what waits to go to the clients (tests, metrics).
   */
  bufferedBytes(): number;
  /** What the open connections reserved of the budget (their worst case; bufferedBytes never exceeds it). */
  reservedBytes(): number;
  /** Open connections whose stream window is used up: the agent can send nothing more until the client reads. */
  stalledConnections(): number;
  close(): void;
}

const DEFAULT_HEADER_TIMEOUT_MS = 100_000;

const REASONS: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 500: 'Internal Server Error', 503: 'Service Unavailable' };

/** A preview host's own answer: the error (its code decides the status, as in the envelope) and a page title. */
type Refusal = { err: AppError; title: string };

function refusal(err: AppError, title: string): Refusal {
  return { err, title };
}

const UNAVAILABLE = 'The machine is not available';
const NOTHING = 'Nothing is answering yet';
const NOT_FOUND = () => refusal(ERRORS.noSuchPreview(), 'No such preview');
const PRIVATE = (err = ERRORS.previewPrivate()) => refusal(err, 'This preview is private');
const STOPPED = () => refusal(ERRORS.previewMachineNotRunning(), UNAVAILABLE);
const UNREACHABLE = () => refusal(ERRORS.previewMachineUnreachable(), UNAVAILABLE);
const NOTHING_LISTENING = () => refusal(ERRORS.previewNothingListening(), NOTHING);
const NO_ANSWER = () => refusal(ERRORS.previewNoAnswer(), NOTHING);

const BUSY: Record<AdmissionRefusal, () => Refusal> = {
  machine: () => refusal(ERRORS.previewMachineBusy(), 'This preview is busy'),
  budget: () => refusal(ERRORS.previewBudgetBusy(), 'This preview is busy'),
};

function rawResponse(status: number, reason: string, headers: Array<[string, string]>): string {
  return `HTTP/1.1 ${status} ${reason}\r\n${headers.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
}

function pairs(flat: readonly string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

export function createPreviewProxy(deps: PreviewProxyDeps): PreviewProxy {
  const { ports } = deps;
  const log = deps.log ?? (() => {});
  const headerTimeoutMs = deps.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS;
  /** Per preview: how to cut each of its open connections. */
  const live = new Map<string, Set<() => void>>();
  const admission = new PreviewAdmission(deps.limits);
  /** Each open connection's measure: the bytes it holds, and its stream's receive window left. */
  const meters = new Set<() => { held: number; windowLeft: number }>();
  /** Meters the connection of `stream` (with its client-side socket or response) until the returned call. */
  function meter(stream: http2.ClientHttp2Stream, client: { readonly writableLength: number }, clientIn: { readonly readableLength: number }): () => void {
    const m = () => ({
      held: stream.readableLength + stream.writableLength + client.writableLength + clientIn.readableLength,
      windowLeft: stream.state?.localWindowSize ?? -1,
    });
    meters.add(m);
    return () => meters.delete(m);
  }
  const offUnpublished = ports.onUnpublished((id) => {
    const cuts = live.get(id);
    live.delete(id);
    for (const cut of cuts ?? []) cut();
  });

  function track(id: string, cut: () => void): () => void {
    let set = live.get(id);
    if (!set) live.set(id, (set = new Set()));
    set.add(cut);
    return () => {
      set!.delete(cut);
      if (set!.size === 0 && live.get(id) === set) live.delete(id);
    };
  }

  function clientAddress(req: IncomingMessage): string {
    if (deps.trustProxy) {
      const xff = req.headers['x-forwarded-for'];
      const last = (Array.isArray(xff) ? xff.join(',') : xff)?.split(',').map((s) => s.trim()).filter(Boolean).pop();
      if (last) return last;
    }
    return req.socket.remoteAddress ?? 'unknown';
  }

  type Admitted = { row: PreviewRow; dropAuthorization: boolean };

  /** Host → live preview → credential. Every refusal is decided here, before any guest byte moves. */
  function admit(req: IncomingMessage): Admitted | Refusal {
    const row = lookup(req);
    if (!row) return NOT_FOUND();
    const cred = ports.authorize(row, { authorization: req.headers.authorization, cookie: req.headers.cookie, origin: req.headers.origin });
    if (!cred.ok) return PRIVATE();
    return { row, dropAuthorization: cred.dropAuthorization };
  }

  function lookup(req: IncomingMessage): PreviewRow | null {
    const id = previewIdFromHost(req.headers.host, ports.domain);
    return id ? ports.resolve(id) : null;
  }

  /** The guest-side connection: one agent stream to the published port. */
  async function dial(row: PreviewRow): Promise<{ stream: http2.ClientHttp2Stream; machineId: string } | Refusal> {
    let target: AgentTarget;
    try {
      target = deps.agentTarget(row.org_id, row.machine_id);
    } catch (e) {
      if (e instanceof AppError && (e.code === 'conflict' || e.code === 'compute_unavailable' || e.code === 'not_found')) return STOPPED();
      throw e;
    }
    let opened: OpenedStream;
    try {
      opened = await deps.openStream(target, streamRequest('tcp.connect', { port: row.port }));
    } catch {
      return UNREACHABLE();
    }
    if (opened.status !== 200) {
      // The agent's refusal (nothing listening, too many connections) is small; nothing of it is shown.
      opened.stream.close(http2.constants.NGHTTP2_CANCEL);
      return NOTHING_LISTENING();
    }
    return { stream: opened.stream, machineId: target.id };
  }

  /** The request head for the guest: the client's request line and the forwarded headers, as bytes. */
  function guestHead(req: IncomingMessage, upgrade: boolean, dropAuthorization: boolean): { head: Buffer; framing: BodyFraming } {
    const headers = requestHeadersForGuest(req.rawHeaders, {
      dropAuthorization,
      upgrade,
      forwarded: { for: clientAddress(req), proto: deps.secureCookies ? 'https' : 'http', host: req.headers.host ?? '' },
    });
    return { head: requestHead(req.method ?? 'GET', req.url ?? '/', headers), framing: framingOf(headers) };
  }

  function sendPage(res: ServerResponse, r: Refusal, requestId: string, accept: string | undefined): number {
    const p: PreviewPage = previewPage(r.err, r.title, requestId, accept);
    if (res.headersSent) {
      res.destroy();
      return p.status;
    }
    res.writeHead(p.status, p.headers);
    res.end(p.body);
    return p.status;
  }

  function writeRawPage(socket: Duplex, r: Refusal, requestId: string, accept: string | undefined): void {
    const p = previewPage(r.err, r.title, requestId, accept);
    const head = rawResponse(p.status, REASONS[p.status] ?? 'Error', [
      ...Object.entries(p.headers),
      ['content-length', String(Buffer.byteLength(p.body))],
      ['connection', 'close'],
    ]);
    if (socket.writable) socket.end(head + p.body);
    socket.destroy();
  }

  /**
   * The one-shot access link: trade the token for a cookie on this hostname only, then go to `/`. A
   * browser that already holds a valid credential is just sent on.
   */
  function access(req: IncomingMessage, res: ServerResponse, row: PreviewRow, requestId: string): number {
    const token = new URL(req.url ?? '/', 'http://preview').searchParams.get('token') ?? '';
    const cookie = req.method === 'GET' || req.method === 'HEAD' ? ports.trade(row, token) : null;
    const headers: Record<string, string> = { location: '/', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'x-request-id': requestId };
    if (cookie) {
      // Host-only (no Domain): the cookie goes to this one preview hostname and nowhere else.
      headers['set-cookie'] = `${PREVIEW_COOKIE}=${cookie}; Path=/; HttpOnly; SameSite=Lax${deps.secureCookies ? '; Secure' : ''}`;
    } else if (!ports.authorize(row, { cookie: req.headers.cookie, origin: req.headers.origin }).ok) {
      return sendPage(
        res,
        PRIVATE(ERRORS.previewAccessLinkInvalid()),
        requestId,
        req.headers.accept,
      );
    }
    res.writeHead(303, headers);
    res.end();
    return 303;
  }

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

  async function serveRequest(req: IncomingMessage, res: ServerResponse, requestId: string): Promise<number> {
    const accept = req.headers.accept;
    const found = lookup(req);
    // The access link is the one way in without a credential (private previews only).
    if (found?.access === 'private' && new URL(req.url ?? '/', 'http://preview').pathname === PREVIEW_ACCESS_PATH) {
      return access(req, res, found, requestId);
    }
    const a = admit(req);
    if ('err' in a) return sendPage(res, a, requestId, accept);
    const { row } = a;
    const { head, framing } = guestHead(req, false, a.dropAuthorization);
    ports.touch(row.id);
    const slot = admission.acquire(row.machine_id);
    if ('refused' in slot) return sendPage(res, BUSY[slot.refused](), requestId, accept);
    res.once('close', slot.release);
    let gone = false;
    res.once('close', () => (gone = true));
    const d = await dial(row);
    if ('err' in d) return sendPage(res, d, requestId, accept);
    const { stream, machineId } = d;
    stream.on('error', () => {});
    // The client left while the stream was opening: nothing will close it later.
    if (gone) {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      return 0;
    }
    res.once('close', meter(stream, res, req));

    return new Promise<number>((resolve) => {
      let status = 0;
      const untrack = track(row.id, () => {
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

  /** A WebSocket (any Upgrade) handshake: the guest's 101 turns the connection into a raw byte pipe. */
  async function serveUpgrade(req: IncomingMessage, socket: Duplex, early: Buffer, requestId: string): Promise<void> {
    const accept = req.headers.accept;
    const a = admit(req);
    if ('err' in a) return writeRawPage(socket, a, requestId, accept);
    const { head } = guestHead(req, true, a.dropAuthorization);
    ports.touch(a.row.id);
    const slot = admission.acquire(a.row.machine_id);
    if ('refused' in slot) return writeRawPage(socket, BUSY[slot.refused](), requestId, accept);
    socket.once('close', slot.release);
    const d = await dial(a.row);
    if ('err' in d) return writeRawPage(socket, d, requestId, accept);
    const { stream, machineId } = d;
    stream.on('error', () => {});
    if (socket.destroyed) return void stream.close(http2.constants.NGHTTP2_CANCEL);
    socket.once('close', meter(stream, socket, socket));
    let answered = false;
    const untrack = track(a.row.id, () => {
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

  return {
    owns: (req) => isPreviewHost(req.headers.host, ports.domain),

    handle(req, res) {
      const requestId = newId('request');
      const started = Date.now();
      // Never log the URL: the access link's query carries a credential.
      serveRequest(req, res, requestId).then(
        (status) => log({ event: 'preview_request', request_id: requestId, method: req.method ?? '', status, ms: Date.now() - started }),
        (e) => {
          if (!(e instanceof AppError)) log({ event: 'internal_error', operation: 'preview.request', request_id: requestId, cause: (e as Error)?.name ?? 'Error' });
          sendPage(res, refusal(e instanceof AppError ? e : ERRORS.previewFailed(), 'Preview error'), requestId, req.headers.accept);
        },
      );
    },

    upgrade(req, socket, head) {
      const requestId = newId('request');
      socket.on('error', () => {});
      serveUpgrade(req, socket, head, requestId).catch((e) => {
        if (e instanceof AppError) return writeRawPage(socket, refusal(e, 'Preview error'), requestId, req.headers.accept);
        log({ event: 'internal_error', operation: 'preview.upgrade', request_id: requestId, cause: (e as Error)?.name ?? 'Error' });
        socket.destroy();
      });
    },

    openConnections() {
      let n = 0;
      for (const s of live.values()) n += s.size;
      return n;
    },

    bufferedBytes() {
      let n = 0;
      for (const m of meters) n += m().held;
      return n;
    },

    stalledConnections() {
      let n = 0;
      for (const m of meters) if (m().windowLeft === 0) n++;
      return n;
    },

    reservedBytes: () => admission.reservedBytes(),

    close() {
      offUnpublished();
      for (const cuts of live.values()) for (const cut of cuts) cut();
      live.clear();
    },
  };
}

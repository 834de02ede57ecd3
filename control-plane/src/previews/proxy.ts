/**
 * The preview proxy: requests whose Host is `prv-<…>.<preview domain>` are served here, on the API's
 * listener, and reach the published port through the agent channel only. Each incoming request (or
 * WebSocket handshake) gets one agent TCP stream (`POST /tcp/:port/connect`) to 127.0.0.1:port in the
 * guest. The request head is serialized here and written to the stream as bytes, then the body
 * (guest-request.ts: Node's http client over an Http2Stream leaked freed heap into small requests); the
 * answer is parsed strictly and bounded (guest-response.ts), so bodies stream both ways, server-sent
 * events pass unbuffered and upgrades become a raw byte pipe. Unpublishing cuts every open connection of
 * the preview at once. The guest's bytes are untrusted, and its answer's head has a deadline.
 *
 * This file is the entry point and its wiring; the parts: authorize.ts (host → preview → credential, the access
 * link), dial.ts (the agent stream and the guest's request head), serve-request.ts and serve-upgrade.ts (one
 * exchange each), connections.ts (open connections: cutting and metering), refusals.ts (refusal pages).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { newId } from '../../../shared/ids.js';
import { isPreviewHost } from '../domain/preview-hostnames.js';
import { PreviewAdmission } from './admission.js';
import { PreviewConnections } from './connections.js';
import type { ForwardedVisitor, PreviewProxyDeps, ProxyContext } from './deps.js';
import { refusal, sendPage, writeRawPage } from './refusals.js';
import { serveForwardedRequest, serveRequest } from './serve-request.js';
import { serveForwardedUpgrade, serveUpgrade } from './serve-upgrade.js';

export type { PreviewProxyDeps } from './deps.js';

export interface PreviewProxy {
  /** Is this request for a preview hostname (then the API and the gateway must leave it alone)? */
  owns(req: IncomingMessage): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** A request another process admitted for this preview and forwarded over the internal channel (no admission here). */
  serveForwarded(req: IncomingMessage, res: ServerResponse, v: ForwardedVisitor): void;
  /** A handshake another process admitted and forwarded likewise. */
  upgradeForwarded(req: IncomingMessage, socket: Duplex, head: Buffer, v: ForwardedVisitor): void;
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

export function createPreviewProxy(deps: PreviewProxyDeps): PreviewProxy {
  const { ports } = deps;
  const ctx: ProxyContext = {
    deps,
    log: deps.log ?? (() => {}),
    headerTimeoutMs: deps.headerTimeoutMs ?? DEFAULT_HEADER_TIMEOUT_MS,
    admission: new PreviewAdmission(deps.limits),
    connections: new PreviewConnections(),
  };
  const { log, admission, connections } = ctx;
  const offUnpublished = ports.onUnpublished((id) => connections.cut(id));

  /** A request's outcome in the log, or its failure as the preview host's page. */
  const request = (req: IncomingMessage, res: ServerResponse, requestId: string, served: Promise<number>): void => {
    const started = Date.now();
    // Never log the URL: the access link's query carries a credential.
    served.then(
      (status) => log({ event: 'preview_request', request_id: requestId, method: req.method ?? '', status, ms: Date.now() - started }),
      (e) => {
        if (!(e instanceof AppError)) log({ event: 'internal_error', operation: 'preview.request', request_id: requestId, cause: (e as Error)?.name ?? 'Error' });
        sendPage(res, refusal(e instanceof AppError ? e : ERRORS.previewFailed(), 'Preview error'), requestId, req.headers.accept);
      },
    );
  };

  /** A handshake's failure as the preview host's page on the raw socket. */
  const upgraded = (req: IncomingMessage, socket: Duplex, requestId: string, served: Promise<void>): void => {
    served.catch((e) => {
      if (e instanceof AppError) return writeRawPage(socket, refusal(e, 'Preview error'), requestId, req.headers.accept);
      log({ event: 'internal_error', operation: 'preview.upgrade', request_id: requestId, cause: (e as Error)?.name ?? 'Error' });
      socket.destroy();
    });
  };

  return {
    owns: (req) => isPreviewHost(req.headers.host, ports.domain),

    handle(req, res) {
      const requestId = newId('request');
      request(req, res, requestId, serveRequest(ctx, req, res, requestId));
    },

    upgrade(req, socket, head) {
      const requestId = newId('request');
      socket.on('error', () => {});
      upgraded(req, socket, requestId, serveUpgrade(ctx, req, socket, head, requestId));
    },

    serveForwarded(req, res, v) {
      request(req, res, v.requestId, serveForwardedRequest(ctx, req, res, v));
    },

    upgradeForwarded(req, socket, head, v) {
      socket.on('error', () => {});
      upgraded(req, socket, v.requestId, serveForwardedUpgrade(ctx, req, socket, head, v));
    },

    openConnections: () => connections.open(),
    bufferedBytes: () => connections.buffered(),
    stalledConnections: () => connections.stalled(),
    reservedBytes: () => admission.reservedBytes(),

    close() {
      offUnpublished();
      connections.cutAll();
    },
  };
}

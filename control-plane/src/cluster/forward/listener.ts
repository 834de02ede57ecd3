/**
 * The internal listener: a second HTTP server each control-plane process opens on INTERNAL_HOST:INTERNAL_PORT
 * (never the tenant-facing port; docs/cluster.md), on which it serves only what another process of the deployment
 * signed for it. Everything else, requests and upgrades alike, is the same 401 envelope with no detail (the reason
 * goes to the operator's log). A served request reaches the handlers with the channel's headers and every
 * credential of ours removed, Host set from the assertion, and the principal rebuilt from the assertion alone.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { newId } from '../../../../shared/ids.js';
import type { OrgPrincipal } from '../../context.js';
import { ERRORS } from '../../errors.js';
import { silentLog, type LogSink } from '../../log.js';
import { principalOf, type Assertion } from './assertion.js';
import { refuseSocket, sendError } from './envelope.js';
import { withoutCredentials } from './headers.js';
import type { DeploymentKey } from './key.js';
import { ReplayCache } from './replay.js';
import { SIGNATURE_WINDOW_MS, verifyRequest, type ForwardVerdict } from './signature.js';

/** For whom a served request acts: a tenant's principal, or a preview's admitted visitor. */
export type OnBehalfOf = { kind: 'tenant'; principal: OrgPrincipal } | { kind: 'preview'; preview_id: string };

/** What the receiving process knows of a forwarded request besides the request itself. */
export interface Forwarded {
  /** The forwarding process's id. */
  sender: string;
  request_id: string;
  client: Assertion['client'];
  on_behalf_of: OnBehalfOf;
}

export interface InternalHandlers {
  request(req: IncomingMessage, res: ServerResponse, f: Forwarded): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, f: Forwarded): void;
}

export interface InternalServerOptions {
  key: DeploymentKey;
  /** This process's id: only requests signed for it are served. */
  processId: string;
  handlers: InternalHandlers;
  log?: LogSink;
  /** Epoch milliseconds (tests move it). */
  now?: () => number;
  /** Nonces remembered at most (default 200,000: over 3,000 forwarded requests a second for a minute). */
  maxNonces?: number;
}

/** Keep-alive between processes outlives the forwarders' idle sockets (forwarder.ts), so a reused one is rarely closed under it. */
const KEEP_ALIVE_MS = 65_000;

function forwardedOf(v: Extract<ForwardVerdict, { ok: true }>): Forwarded {
  const a = v.assertion;
  const on_behalf_of: OnBehalfOf = a.on_behalf_of.kind === 'tenant'
    ? { kind: 'tenant', principal: principalOf(a.on_behalf_of) }
    : { kind: 'preview', preview_id: a.on_behalf_of.preview_id };
  return { sender: v.sender, request_id: a.request_id, client: a.client, on_behalf_of };
}

/**
 * Leaves on `req` only what the handlers may see: the same credential rule the forwarder applied (Authorization
 * kept only for a preview, where the forwarder already dropped the preview's own), the channel's headers gone,
 * Host the asserted one. `rawHeaders` and `headers` are both rewritten (adapters read one or the other).
 */
function scrub(req: IncomingMessage, f: Forwarded): void {
  const raw = [...withoutCredentials(req.rawHeaders, { authorization: f.on_behalf_of.kind === 'preview' ? 'keep' : 'drop' }), 'Host', f.client.host];
  const kept = new Set<string>();
  const cookies: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    kept.add(lower);
    if (lower === 'cookie') cookies.push(raw[i + 1]!);
  }
  const headers = req.headers;
  for (const name of Object.keys(headers)) if (!kept.has(name)) delete headers[name];
  if (cookies.length) headers.cookie = cookies.join('; ');
  headers.host = f.client.host;
  req.rawHeaders = raw;
}

export function createInternalServer(o: InternalServerOptions): http.Server {
  const log = o.log ?? silentLog;
  const now = o.now ?? Date.now;
  const replay = new ReplayCache({ windowMs: SIGNATURE_WINDOW_MS, maxEntries: o.maxNonces ?? 200_000 });
  const admit = (req: IncomingMessage): Forwarded | null => {
    const v = verifyRequest(o.key, req, { self: o.processId, now: now(), replay });
    if (!v.ok) {
      log({ event: 'forward_refused', reason: v.reason, method: req.method ?? null });
      return null;
    }
    const f = forwardedOf(v);
    scrub(req, f);
    return f;
  };
  const server = http.createServer({ keepAliveTimeout: KEEP_ALIVE_MS, requestTimeout: 0 }, (req, res) => {
    const f = admit(req);
    if (f) o.handlers.request(req, res, f);
    else sendError(res, ERRORS.forwardNotSigned(), newId('request'));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const f = admit(req);
    if (f) o.handlers.upgrade(req, socket, head, f);
    else refuseSocket(socket, ERRORS.forwardNotSigned(), newId('request'));
  });
  return server;
}

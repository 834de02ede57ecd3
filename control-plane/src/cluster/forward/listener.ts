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
import type { Forwarded, OnBehalfOf, OrgPrincipal } from '../../context.js';
import { ERRORS } from '../../errors.js';
import { silentLog, type LogSink } from '../../log.js';
import { principalOf, type Assertion, type HostCallAssertion } from './assertion.js';
import { refuseSocket, sendError } from './envelope.js';
import { withoutCredentials } from './headers.js';
import type { DeploymentKey } from './key.js';
import { ReplayCache } from './replay.js';
import { SIGNATURE_WINDOW_MS, verifyRequest } from './signature.js';

/** Defined with the request's bindings (context.ts): what a forwarded request's handlers get. */
export type { Forwarded, OnBehalfOf };

export interface InternalHandlers {
  request(req: IncomingMessage, res: ServerResponse, f: Forwarded): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, f: Forwarded): void;
}

/** A host-to-host call (assertion.ts `HostCallAssertion`): from another process, for no tenant. */
export interface HostCall {
  /** The calling process's id. */
  sender: string;
  /** The calling process's host, as it signed it. */
  host_id: string;
  request_id: string;
}

/** What serves host-to-host calls (e.g. internal-layers.ts): requests only, never an upgrade. */
export interface HostHandlers {
  request(req: IncomingMessage, res: ServerResponse, c: HostCall): void;
}

export interface InternalServerOptions {
  key: DeploymentKey;
  /** This process's id: only requests signed for it are served. */
  processId: string;
  /** Forwarded tenants and preview visitors: never given a host-to-host call. */
  handlers: InternalHandlers;
  /** Host-to-host calls, and only those (absent: each is refused 404). */
  hostHandlers?: HostHandlers;
  log?: LogSink;
  /** Epoch milliseconds (tests move it). */
  now?: () => number;
  /** Nonces remembered at most (default 200,000: over 3,000 forwarded requests a second for a minute). */
  maxNonces?: number;
}

/** Keep-alive between processes outlives the forwarders' idle sockets (forwarder.ts), so a reused one is rarely closed under it. */
const KEEP_ALIVE_MS = 65_000;

type Admitted = { kind: 'forwarded'; f: Forwarded } | { kind: 'host'; c: HostCall };

function isHostCall(a: Assertion | HostCallAssertion): a is HostCallAssertion {
  return a.on_behalf_of.kind === 'host';
}

function forwardedOf(sender: string, a: Assertion): Forwarded {
  const on_behalf_of: OnBehalfOf = a.on_behalf_of.kind === 'tenant'
    ? { kind: 'tenant', principal: principalOf(a.on_behalf_of) }
    : { kind: 'preview', preview_id: a.on_behalf_of.preview_id };
  return { sender, request_id: a.request_id, client: a.client, on_behalf_of };
}

/** What a host call's handlers see of the request: no credential, no channel header, no cookie (a host call has none). */
function scrubHostCall(req: IncomingMessage): void {
  const all = withoutCredentials(req.rawHeaders, { authorization: 'drop' });
  const raw: string[] = [];
  const kept = new Set<string>();
  for (let i = 0; i + 1 < all.length; i += 2) {
    const lower = all[i]!.toLowerCase();
    if (lower === 'cookie') continue;
    kept.add(lower);
    raw.push(all[i]!, all[i + 1]!);
  }
  for (const name of Object.keys(req.headers)) if (!kept.has(name)) delete req.headers[name];
  req.rawHeaders = raw;
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
  const admit = (req: IncomingMessage): Admitted | null => {
    const v = verifyRequest(o.key, req, { self: o.processId, now: now(), replay });
    if (!v.ok) {
      log({ event: 'forward_refused', reason: v.reason, method: req.method ?? null });
      return null;
    }
    const a = v.assertion;
    if (isHostCall(a)) {
      scrubHostCall(req);
      return { kind: 'host', c: { sender: v.sender, host_id: a.on_behalf_of.host_id, request_id: a.request_id } };
    }
    const f = forwardedOf(v.sender, a);
    scrub(req, f);
    return { kind: 'forwarded', f };
  };
  // Each kind reaches its own handlers only: a host call never the tenant API, a tenant never a host handler.
  const server = http.createServer({ keepAliveTimeout: KEEP_ALIVE_MS, requestTimeout: 0 }, (req, res) => {
    const a = admit(req);
    if (!a) sendError(res, ERRORS.forwardNotSigned(), newId('request'));
    else if (a.kind === 'forwarded') o.handlers.request(req, res, a.f);
    else if (o.hostHandlers) o.hostHandlers.request(req, res, a.c);
    else sendError(res, ERRORS.noSuchHostCall(), a.c.request_id);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const a = admit(req);
    if (!a) refuseSocket(socket, ERRORS.forwardNotSigned(), newId('request'));
    else if (a.kind === 'forwarded') o.handlers.upgrade(req, socket, head, a.f);
    else refuseSocket(socket, ERRORS.noSuchHostCall(), a.c.request_id);
  });
  return server;
}

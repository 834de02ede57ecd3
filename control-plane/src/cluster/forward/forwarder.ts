/**
 * The forwarding side: a request or an upgrade this process received for a machine another process owns, sent to
 * that process's internal listener with the tenant's credentials stripped and the channel's signature added.
 * One keep-alive connection pool per owner for requests (a request's overhead is then one loopback or LAN round
 * trip); a fresh connection per upgrade (it leaves the pool anyway). A connect deadline makes a black-holed owner
 * a quick 503, never a hang.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { ERRORS } from '../../errors.js';
import { causeChain, silentLog, type LogSink } from '../../log.js';
import type { Dial, DialedRequest, ForwardCall } from './call.js';
import { forwardFetch } from './forward-fetch.js';
import { forwardBuffered, type BufferedAnswer } from './forward-buffered.js';
import { forwardRequest, type Settled } from './forward-request.js';
import { forwardUpgrade } from './forward-upgrade.js';
import { requestHeadersForOwner } from './headers.js';
import type { HostCallAssertion, SignedAssertion } from './assertion.js';
import type { DeploymentKey } from './key.js';
import type { RemoteOwner } from './owner.js';
import { signRequest } from './signature.js';

export interface ForwarderOptions {
  key: DeploymentKey;
  /** This process's id (the sender in every signature). */
  processId: string;
  log?: LogSink;
  now?: () => number;
  /** How long a connection to an owner may take to open (default 3000 ms). */
  connectTimeoutMs?: number;
}

/** A request of this process's own to another (a host-to-host call, host-call.ts): signed, on the owner's pool. */
export interface OwnRequest {
  method: string;
  /** Path and query, as signed. */
  path: string;
  assertion: HostCallAssertion;
  headers?: string[];
}

export interface Forwarder {
  /** Opens a signed request of this process's own to `target` on its pool, with the connect deadline (end() it). */
  open(target: RemoteOwner, r: OwnRequest): http.ClientRequest;
  /**
   * `body`: where the caller's body is read from when not from `req` itself — a request the API app already wrapped
   * (its Request holds the socket's body as a stream: reading `req` again would find it consumed).
   */
  request(req: IncomingMessage, res: ServerResponse, call: ForwardCall, body?: Readable | Buffer): void;
  /**
   * `request` to an owner the sender remembered (cluster/owner-cache.ts), `body` replayable: `refused` when that owner
   * refused before acting or could not be reached, with nothing sent to the caller (forward-request.ts `settle`).
   */
  attempt(req: IncomingMessage, res: ServerResponse, call: ForwardCall, body?: Readable | Buffer): Promise<Settled>;
  /** A request made inside the process (no socket: the MCP endpoint's /v1 calls), answered as a web Response. */
  fetch(request: Request, call: ForwardCall): Promise<Response>;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, call: ForwardCall): void;
  /** `req` with `body` (already read), its answer read whole up to `limit` bytes (forward-buffered.ts). */
  buffered(req: DialedRequest, call: ForwardCall, body: Buffer, limit: number): Promise<BufferedAnswer>;
  /** Upgraded channels open now (each a pair of sockets). */
  channels(): number;
  /** Ends every open channel and pooled connection. */
  close(): void;
}

/** Owners' pools kept at most; the oldest is dropped past it (owners that went away leave their address behind). */
const MAX_POOLS = 256;
/** An idle pooled connection is closed after this long: below the listener's keep-alive (listener.ts). */
const IDLE_MS = 30_000;

interface Pool {
  host: string;
  port: number;
  agent: http.Agent;
}

function parseAddress(address: string): { host: string; port: number } {
  const u = new URL(address);
  if (u.protocol !== 'http:' || !u.port) throw new TypeError('an internal address is http://host:port');
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(u.port) };
}

/** Destroys `req` unless its connection opens within `ms`. */
function connectDeadline(req: http.ClientRequest, ms: number): void {
  req.once('socket', (s) => {
    if (!s.connecting) return;
    const timer = setTimeout(() => req.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), ms);
    s.once('connect', () => clearTimeout(timer));
    s.once('close', () => clearTimeout(timer));
  });
}

export function createForwarder(o: ForwarderOptions): Forwarder {
  const log = o.log ?? silentLog;
  const now = o.now ?? Date.now;
  const pools = new Map<string, Pool>();
  const open = new Set<Duplex>();

  const poolOf = (address: string): Pool => {
    let p = pools.get(address);
    if (!p) {
      p = { ...parseAddress(address), agent: new http.Agent({ keepAlive: true, timeout: IDLE_MS }) };
      pools.set(address, p);
      for (const [old, q] of pools) {
        if (pools.size <= MAX_POOLS) break;
        q.agent.destroy();
        pools.delete(old);
      }
    }
    return p;
  };

  /** One signed request to `target` (its headers before the channel's own and Host); a fresh connection for an upgrade or when
  // `fresh` (forward-buffered.ts). */
  const signed = (target: RemoteOwner, r: { method: string; path: string; assertion: SignedAssertion; host: string; headers: string[]; upgrade: boolean; fresh?: boolean }) => {
    const pool = poolOf(target.address);
    const sig = signRequest(o.key, { method: r.method, path: r.path, sender: o.processId, target: target.processId, assertion: r.assertion, now: now() });
    const headers = [...r.headers, 'Host', r.host, ...Object.entries(sig).flat()];
    const up = http.request({ host: pool.host, port: pool.port, method: r.method, path: r.path, headers, agent: r.upgrade || r.fresh ? false : pool.agent, setHost: false });
    connectDeadline(up, o.connectTimeoutMs ?? 3000);
    return up;
  };

  const dial: Dial = (req, call, upgrade, fresh = false) =>
    signed(call.target, {
      method: req.method ?? 'GET', path: req.url ?? '/', assertion: call.assertion, host: call.assertion.client.host, upgrade, fresh,
      headers: requestHeadersForOwner(req.rawHeaders, { authorization: call.authorization, upgrade }),
    });

  const failed = (call: ForwardCall, e: unknown) =>
    log({ event: 'forward_failed', target: call.target.processId, request_id: call.assertion.request_id, cause: causeChain(e) });

  return {
    open: (target, r) => signed(target, { ...r, host: new URL(target.address).host, headers: r.headers ?? [], upgrade: false }),
    request: (req, res, call, body) => forwardRequest(dial, req, res, call, (e) => failed(call, e), body),
    attempt: (req, res, call, body) => new Promise<Settled>((settle) => forwardRequest(dial, req, res, call, (e) => failed(call, e), body, settle)),
    fetch: (request, call) =>
      forwardFetch(dial, request, call).catch((e: unknown) => {
        failed(call, e);
        throw ERRORS.machineOwnerUnreachable();
      }),
    upgrade: (req, socket, head, call) => {
      const started = Date.now();
      const ended = () => log({ event: 'forward_channel_closed', target: call.target.processId, request_id: call.assertion.request_id, ms: Date.now() - started });
      forwardUpgrade(dial, req, socket, head, call, { open, failed: (e) => failed(call, e), ended });
    },
    buffered: async (req, call, body, limit) => {
      const a = await forwardBuffered(dial, req, call, body, limit);
      if (a.kind !== 'answer') failed(call, a.error);
      return a;
    },
    channels: () => open.size,
    close: () => {
      for (const s of open) s.destroy();
      for (const p of pools.values()) p.agent.destroy();
      pools.clear();
    },
  };
}

/**
 * The WebSocket gateway: screen, terminal, events and input channels on the control plane's HTTP
 * server (docs/gateway.md). Every handshake is authenticated, organization-scoped and
 * permission-checked before the upgrade; a refusal there is an ordinary HTTP error in the API's
 * envelope. After the upgrade, failures are close codes (shared/schemas/gateway.ts CLOSE_CODES).
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { AppError, errorBody, parseOrThrow } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { isMachineId, newId } from '../../../shared/ids.js';
import {
  CLOSE_CODES,
  EventsChannelQuery,
  InputChannelQuery,
  ScreenChannelQuery,
  TerminalChannelQuery,
  type CloseCode,
  type GatewayChannel,
} from '../../../shared/schemas/gateway.js';
import type { Permission } from '../../../shared/schemas/org.js';
import { actsInOrg, type OrgPrincipal } from '../context.js';
import type { GatewayDeps } from './deps.js';
import { serveEvents } from './events.js';
import { channelRoute, type ChannelCaller } from './forward.js';
import { serveInput, type InputLimits } from './input.js';
import { ScreenHub, type ScreenLimits, type ScreenStreamInfo } from './screen.js';
import { serveTerminal } from './terminal.js';

export interface GatewayOptions {
  /** Ping interval; a socket that missed the previous pong is terminated. */
  heartbeatMs?: number;
  screen?: Partial<ScreenLimits>;
  input?: Partial<InputLimits>;
  /** Events channel: close a client (4408) whose unsent backlog exceeds this. */
  eventsMaxBuffered?: number;
  /** How often an open socket's credentials are checked again (revoked key, signed-out session, lost role). */
  credentialCheckMs?: number;
  /** Upgrades someone else serves on the same listener (preview hostnames): left untouched. */
  skip?: (req: IncomingMessage) => boolean;
}

/** A revoked key or a signed-out session loses its open channels within this long. */
export const DEFAULT_CREDENTIAL_CHECK_MS = 15_000;

export interface Gateway {
  /** Closes every channel socket (1001) and stops the agent streams. */
  close(): Promise<void>;
  /** Live sockets per channel (tests, metrics). */
  counts(): Record<GatewayChannel, number>;
  /** Shared agent screen streams with their viewer counts and frames dropped for slow viewers. */
  screenStreams(): ScreenStreamInfo[];
  /**
   * Serves a channel another process of the deployment admitted and forwarded over the internal channel
   * (cluster/forward/listener.ts): `principal` is the one its signed assertion names, `requestId` the caller's.
   */
  serveForwarded(req: IncomingMessage, socket: Duplex, head: Buffer, principal: OrgPrincipal, requestId: string): void;
}

/** Largest message a client may send per channel (ws closes with 1009 beyond it). */
const MAX_PAYLOAD: Record<GatewayChannel, number> = {
  screen: 1024,
  events: 1024,
  // keyboard.type allows 20000 characters; UTF-8 and JSON escaping can take 6 bytes for one.
  input: 160 * 1024,
  terminal: 1024 * 1024,
};

const TERM_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

interface Route {
  channel: GatewayChannel;
  machineId: string;
  termId?: string;
}

function route(pathname: string): Route | null {
  const m = /^\/v1\/machines\/([^/]+)\/(screen|input|events\/live|terminals\/([^/]+)\/attach)$/.exec(pathname);
  if (!m) return null;
  const machineId = decodeURIComponent(m[1]!);
  if (m[2] === 'screen') return { channel: 'screen', machineId };
  if (m[2] === 'input') return { channel: 'input', machineId };
  if (m[2] === 'events/live') return { channel: 'events', machineId };
  return { channel: 'terminal', machineId, termId: decodeURIComponent(m[3]!) };
}

const PERMISSION: Record<GatewayChannel, Permission | null> = {
  screen: null,
  events: null,
  // A terminal is a shell on the machine: the same permission as opening one.
  terminal: 'machines:control',
  input: 'machines:control',
};

const REASONS: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict',
  426: 'Upgrade Required', 500: 'Internal Server Error', 501: 'Not Implemented', 503: 'Service Unavailable',
};

function refuse(socket: Duplex, err: AppError, requestId: string): void {
  const body = JSON.stringify(errorBody(err, requestId));
  const headers = [
    `HTTP/1.1 ${err.status} ${REASONS[err.status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${requestId}`,
    'Connection: close',
    ...Object.entries(err.headers).map(([k, v]) => `${k}: ${v}`),
  ];
  if (socket.writable) socket.end(`${headers.join('\r\n')}\r\n\r\n${body}`);
  socket.destroy();
}

/** One open channel's periodic re-check: `check` re-evaluates the handshake's answer, `end` ends the channel. */
interface Recheck {
  check: () => Promise<CloseCode | null>;
  end: (code: CloseCode) => void;
}

export function attachGateway(server: Server, deps: GatewayDeps, opts: GatewayOptions = {}): Gateway {
  const log = deps.log ?? (() => {});
  const servers = Object.fromEntries(
    (Object.keys(MAX_PAYLOAD) as GatewayChannel[]).map((ch) => [ch, new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD[ch], perMessageDeflate: false })]),
  ) as Record<GatewayChannel, WebSocketServer>;
  const hub = new ScreenHub(deps, opts.screen);
  const alive = new WeakMap<WebSocket, boolean>();
  /**
   * Per open channel: what the handshake admitted, re-evaluated on a timer (a channel served here, keyed by its
   * WebSocket, or one forwarded to the machine's owner, keyed by the caller's socket).
   */
  const rechecks = new Map<WebSocket | Duplex, Recheck>();
  /** The callers' sockets of channels forwarded to other processes (ended on close). */
  const forwarded = new Set<Duplex>();
  let closing = false;

  /** The principal of the handshake: the key or cookie's here, the assertion's for a forwarded one. */
  async function principalOf(req: IncomingMessage, caller: ChannelCaller): Promise<OrgPrincipal> {
    if (caller.arrival === 'forwarded') return caller.principal;
    const p = await deps.authenticate(req);
    if (!p) throw req.headers.authorization !== undefined ? ERRORS.badApiKey() : ERRORS.signInOrSendKey();
    // Browsers send cookies on cross-site WebSocket handshakes (no CORS applies to them), so a
    // cookie-authenticated handshake must come from our own pages: this is the CSWSH gate. (A forwarded
    // handshake passed it where it arrived.)
    if (p.via_cookie && !deps.isRecognisedOrigin(req.headers.origin)) {
      throw ERRORS.cookieChannelNeedsOrigin();
    }
    if (!actsInOrg(p)) throw ERRORS.noOrganization();
    return p;
  }

  /** Everything decidable before the upgrade; throws AppError. */
  async function admit(req: IncomingMessage, url: URL, caller: ChannelCaller): Promise<{ r: Route; p: OrgPrincipal; query: Record<string, unknown> }> {
    const r = route(url.pathname);
    if (!r) throw ERRORS.noSuchChannel();
    const p = await principalOf(req, caller);
    const perm = PERMISSION[r.channel];
    if (perm && !p.permissions.has(perm)) throw ERRORS.needsPermission(perm);
    // Another organization's machine is not found, never forbidden.
    if (!isMachineId(r.machineId)) throw ERRORS.noSuchMachine();
    await deps.getMachine(p.org_id, r.machineId);
    if (r.termId !== undefined && !TERM_ID_RE.test(r.termId)) throw ERRORS.noSuchTerminal();
    const raw = Object.fromEntries(url.searchParams);
    const schema = { screen: ScreenChannelQuery, events: EventsChannelQuery, input: InputChannelQuery, terminal: TerminalChannelQuery }[r.channel];
    const query = parseOrThrow(schema as { safeParse(v: unknown): { success: true; data: Record<string, unknown> } | { success: false; error: never } }, raw, 'query');
    if (r.channel === 'events' && typeof query.cursor === 'string') deps.events.validateCursor(query.cursor);
    if (r.channel === 'input') await deps.leases.checkSession(p, r.machineId, query.session_id as string);
    else if (typeof query.session_id === 'string') await deps.sessions?.checkAttach(p, r.machineId, query.session_id);
    return { r, p, query };
  }

  /**
   * Security gate: the handshake's answer must stay true while the channel is open. A tenant's request headers
   * (key or cookie) are authenticated again, against the same organization and permission; a forwarded channel's
   * principal is its assertion's (the arriving process re-checks the credential and ends the channel there).
   */
  const recheckOf = (req: IncomingMessage, caller: ChannelCaller, p: OrgPrincipal, r: Route) => async (): Promise<CloseCode | null> => {
    const now = caller.arrival === 'forwarded' ? caller.principal : await deps.authenticate(req);
    if (!now) return CLOSE_CODES.unauthenticated;
    const perm = PERMISSION[r.channel];
    if (now.org_id !== p.org_id || (perm && !now.permissions.has(perm))) return CLOSE_CODES.permission_denied;
    try {
      await deps.getMachine(p.org_id, r.machineId);
    } catch {
      return CLOSE_CODES.not_found;
    }
    return null;
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (opts.skip?.(req)) return;
    handshake(req, socket, head, newId('request'), { arrival: 'tenant' });
  };

  function handshake(req: IncomingMessage, socket: Duplex, head: Buffer, requestId: string, caller: ChannelCaller): void {
    socket.on('error', () => {});
    void upgrade(req, socket, head, requestId, caller).catch(() => socket.destroy());
  }

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, requestId: string, caller: ChannelCaller): Promise<void> {
    let admitted: Awaited<ReturnType<typeof admit>>;
    let where: Awaited<ReturnType<typeof channelRoute>>;
    try {
      if (closing) throw ERRORS.serverShuttingDown();
      const url = new URL(req.url ?? '/', 'http://gateway');
      admitted = await admit(req, url, caller);
      where = await channelRoute(deps.forwarding, req, admitted.r.machineId, admitted.p, caller, requestId);
      // The admission awaited the store: a shutdown begun meanwhile opens no new channel.
      if (closing) throw ERRORS.serverShuttingDown();
    } catch (e) {
      const err = e instanceof AppError ? e : ERRORS.channelNotOpened();
      if (!(e instanceof AppError)) log({ event: 'internal_error', operation: 'gateway.upgrade', request_id: requestId, cause: (e as Error)?.name ?? 'Error' });
      log({ event: 'ws_refused', request_id: requestId, status: err.status });
      refuse(socket, err, requestId);
      return;
    }
    const { r, p, query } = admitted;
    if (where.kind === 'forward') {
      if (socket.destroyed) return;
      // The owner runs the channel (and attaches its session); this process keeps the caller's socket and its
      // credential re-check: ending that socket ends the forwarded channel on both sides.
      forwarded.add(socket);
      rechecks.set(socket, { check: recheckOf(req, caller, p, r), end: () => socket.destroy() });
      socket.once('close', () => {
        forwarded.delete(socket);
        rechecks.delete(socket);
      });
      log({ event: 'ws_forwarded', channel: r.channel, request_id: requestId, target: where.call.target.processId });
      deps.forwarding?.forwarder.upgrade(req, socket, head, where.call);
      return;
    }
    // The named session is attached while this socket is open (it cannot go idle or expire), recorded before the
    // handshake completes: once the client sees the channel open, the session is in use, on either engine.
    let detach: (() => void) | null = null;
    if (typeof query.session_id === 'string' && deps.sessions) detach = await deps.sessions.attach(query.session_id).catch(() => null);
    if (socket.destroyed || closing) {
      detach?.();
      socket.destroy();
      return;
    }
    const wss = servers[r.channel];
    wss.handleUpgrade(req, socket, head, (ws) => {
      const started = Date.now();
      alive.set(ws, true);
      rechecks.set(ws, {
        check: recheckOf(req, caller, p, r),
        end: (code) => ws.close(code, code === CLOSE_CODES.unauthenticated ? 'credentials no longer valid' : 'access no longer allowed'),
      });
      ws.once('close', () => rechecks.delete(ws));
      ws.on('pong', () => alive.set(ws, true));
      ws.on('error', () => {});
      ws.once('close', (code) => log({ event: 'ws', channel: r.channel, request_id: requestId, close: code, ms: Date.now() - started }));
      const orgId = p.org_id;
      if (detach) {
        const release = detach;
        ws.once('close', () => release());
      }
      try {
        switch (r.channel) {
          case 'screen': {
            // Viewers with the same stream parameters share one agent stream; the session is not one of them.
            const { session_id: _s, ...stream } = query as ScreenChannelQuery;
            hub.join(ws, orgId, r.machineId, stream);
            break;
          }
          case 'terminal':
            serveTerminal(ws, deps, orgId, r.machineId, r.termId!);
            break;
          case 'events':
            serveEvents(ws, deps, r.machineId, (query.cursor as string | undefined) ?? null, opts.eventsMaxBuffered);
            break;
          case 'input':
            serveInput(ws, deps, p, r.machineId, query.session_id as string, opts.input);
            break;
        }
      } catch (e) {
        log({ event: 'internal_error', operation: `gateway.${r.channel}`, request_id: requestId, cause: (e as Error)?.name ?? 'Error' });
        ws.close(4500, 'internal error');
      }
    });
  }
  server.on('upgrade', onUpgrade);

  const heartbeat = setInterval(() => {
    for (const wss of Object.values(servers)) {
      for (const ws of wss.clients) {
        if (alive.get(ws) === false) {
          ws.terminate();
          continue;
        }
        alive.set(ws, false);
        try {
          ws.ping();
        } catch {
          /* closing */
        }
      }
    }
  }, opts.heartbeatMs ?? 30_000);
  heartbeat.unref();

  let checking = false;
  const credentialCheck = setInterval(() => {
    // One pass at a time: a pass awaits the store for every socket.
    if (checking) return;
    checking = true;
    void (async () => {
      for (const [channel, recheck] of [...rechecks]) {
        let code: CloseCode | null;
        try {
          code = await recheck.check();
        } catch {
          code = CLOSE_CODES.internal_error;
        }
        if (code !== null && rechecks.has(channel)) {
          rechecks.delete(channel);
          recheck.end(code);
        }
      }
    })().finally(() => {
      checking = false;
    });
  }, opts.credentialCheckMs ?? DEFAULT_CREDENTIAL_CHECK_MS);
  credentialCheck.unref();

  return {
    async close() {
      closing = true;
      clearInterval(heartbeat);
      clearInterval(credentialCheck);
      server.off('upgrade', onUpgrade);
      for (const s of forwarded) s.destroy();
      hub.close();
      await Promise.all(
        Object.values(servers).map(
          (wss) =>
            new Promise<void>((resolve) => {
              for (const ws of wss.clients) ws.close(1001, 'server shutting down');
              const t = setTimeout(() => {
                for (const ws of wss.clients) ws.terminate();
              }, 1000);
              t.unref();
              wss.close(() => {
                clearTimeout(t);
                resolve();
              });
            }),
        ),
      );
    },
    screenStreams: () => hub.streams(),
    serveForwarded: (req, socket, head, principal, requestId) => handshake(req, socket, head, requestId, { arrival: 'forwarded', principal }),
    counts() {
      return Object.fromEntries(Object.entries(servers).map(([k, v]) => [k, v.clients.size])) as Record<GatewayChannel, number>;
    },
  };
}

import http2 from 'node:http2';
import type net from 'node:net';
import { getRequestListener } from '@hono/node-server';
import type { Hono } from 'hono';
import { AGENT_SESSION_MEMORY_MB } from '../../../shared/agent-protocol.js';
import { ROUTE_TEMPLATE, type AgentEnv } from '../http/env.js';
import type { LogSink } from '../http/log.js';

/** How long a closing server lets requests in flight finish before it cuts its connections. */
export const CLOSE_GRACE_MS = 1_000;

/** The live HTTP/2 sessions of each agent server (closeAgentServer ends them). */
const liveSessions = new WeakMap<http2.Http2Server, Set<http2.ServerHttp2Session>>();

/**
 * The agent's HTTP/2 cleartext server. It never listens on a network address: channels
 * (unix socket, virtio-serial) hand it connections with `emit('connection', duplex)`.
 */
export function createAgentServer(app: Hono<AgentEnv>, log: LogSink): http2.Http2Server {
  const listener = getRequestListener(app.fetch);
  const server = http2.createServer({
    // Screens and file ranges are large; a bigger window avoids stalls on the single connection.
    settings: { initialWindowSize: 8 * 1024 * 1024, maxConcurrentStreams: 1000 },
    // A large file write must fail or succeed alone, never refuse the machine's other streams.
    maxSessionMemory: AGENT_SESSION_MEMORY_MB,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  liveSessions.set(server, sessions);
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.setLocalWindowSize?.(32 * 1024 * 1024);
  });
  server.on('request', (req, res) => {
    const started = process.hrtime.bigint();
    let bytes = 0;
    const write = res.write.bind(res) as (...a: unknown[]) => boolean;
    const end = res.end.bind(res) as (...a: unknown[]) => unknown;
    const count = (chunk: unknown) => {
      if (typeof chunk === 'string') bytes += Buffer.byteLength(chunk);
      else if (chunk instanceof Uint8Array) bytes += chunk.byteLength;
    };
    (res as unknown as { write: (...a: unknown[]) => boolean }).write = (...a: unknown[]) => {
      count(a[0]);
      return write(...a);
    };
    (res as unknown as { end: (...a: unknown[]) => unknown }).end = (...a: unknown[]) => {
      if (typeof a[0] !== 'function') count(a[0]);
      return end(...a);
    };
    res.on('close', () => {
      const route = (req as unknown as Record<symbol, unknown>)[ROUTE_TEMPLATE];
      log({
        event: 'request',
        method: req.method,
        route: typeof route === 'string' ? route : 'unmatched',
        status: res.statusCode,
        bytes,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
      });
    });
    void listener(req as never, res as never);
  });
  // A broken peer must never take the agent down.
  server.on('sessionError', () => {});
  return server;
}

/**
 * Stop serving: no new connections (the channel's `listener`, when there is one), GOAWAY on every live
 * session so requests in flight can finish, then, after CLOSE_GRACE_MS, every session still open is
 * destroyed with its streams. A screen stream or a pty attach never ends by itself, and a bare
 * `close()` of the server or the listener waits for exactly those: an agent shutting down (or a test's
 * teardown) would wait for as long as a viewer stays connected.
 */
export async function closeAgentServer(server: http2.Http2Server, listener?: net.Server | null, graceMs = CLOSE_GRACE_MS): Promise<void> {
  const done = [
    new Promise<void>((resolve) => server.close(() => resolve())),
    ...(listener ? [new Promise<void>((resolve) => listener.close(() => resolve()))] : []),
  ];
  const sessions = [...(liveSessions.get(server) ?? [])];
  const ended = sessions.map((s) => new Promise<void>((resolve) => (s.closed || s.destroyed ? resolve() : s.once('close', () => resolve()))));
  for (const s of sessions) if (!s.closed && !s.destroyed) s.close();
  const timer = setTimeout(() => {
    for (const s of sessions) if (!s.destroyed) s.destroy();
  }, graceMs);
  await Promise.all(ended);
  clearTimeout(timer);
  await Promise.all(done);
}

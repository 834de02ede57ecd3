import http2 from 'node:http2';
import { getRequestListener } from '@hono/node-server';
import type { Hono } from 'hono';
import { AGENT_SESSION_MEMORY_MB } from '../../../shared/agent-protocol.js';
import { ROUTE_TEMPLATE, type AgentEnv } from '../app.js';
import type { LogSink } from '../http/log.js';

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
  server.on('session', (session) => {
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

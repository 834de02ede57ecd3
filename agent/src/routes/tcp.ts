import http2 from 'node:http2';
import net from 'node:net';
import { Hono } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { AGENT_ROUTES } from '../../../shared/agent-protocol.js';
import { parseOrThrow } from '../../../shared/errors.js';
import { GuestPortParam } from '../../../shared/schemas/ports.js';
import { ROUTE_TEMPLATE, type AgentEnv, type NodeEnv } from '../http/env.js';
import { REQUEST_ID_HEADER } from '../http/errors.js';
import { ERRORS } from '../errors.js';

const R = AGENT_ROUTES;

/** Open TCP streams at once; each holds a socket and an HTTP/2 stream, so the count is bounded. */
export const MAX_TCP_STREAMS = 512;
/** Deadline for the guest's loopback to accept (a full listen backlog can stall a connect). */
const CONNECT_TIMEOUT_MS = 5_000;

/** Connects to 127.0.0.1:port, then [::1]:port (servers bound to `localhost` may be IPv6 only). */
function connectLoopback(port: number): Promise<net.Socket> {
  const attempt = (host: string) =>
    new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ host, port });
      const timer = setTimeout(() => s.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), CONNECT_TIMEOUT_MS);
      s.once('connect', () => {
        clearTimeout(timer);
        s.removeAllListeners('error');
        resolve(s);
      });
      s.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  return attempt('127.0.0.1').catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ECONNREFUSED') throw e;
    return attempt('::1').catch(() => {
      throw e;
    });
  });
}

/**
 * POST /tcp/:port/connect: one full-duplex HTTP/2 stream bridged to a TCP connection on the guest's own
 * loopback. Only loopback: the route reaches what the machine itself serves, never its network.
 */
export function tcpRoutes(): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  let open = 0;

  app.post(R['tcp.connect'].path, async (c) => {
    const env = c.env as NodeEnv | undefined;
    const port = parseOrThrow(GuestPortParam, c.req.param('port'), 'port', 'port');
    if (!env?.incoming || !env.outgoing) throw ERRORS.connectNeedsChannel();
    const { incoming, outgoing } = env;
    (incoming as unknown as Record<symbol, unknown>)[ROUTE_TEMPLATE] = R['tcp.connect'].path;
    if (open >= MAX_TCP_STREAMS) {
      throw ERRORS.tooManyTcpStreams(MAX_TCP_STREAMS);
    }
    open++;
    try {
      let socket: net.Socket;
      try {
        socket = await connectLoopback(port);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        throw ERRORS.portNotAccepting(port, code === 'ECONNREFUSED');
      }
      socket.setNoDelay(true);
      outgoing.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store', [REQUEST_ID_HEADER]: c.get('requestId') });
      (outgoing as unknown as { flushHeaders?: () => void }).flushHeaders?.();

      // Both directions respect backpressure: a slow reader pauses its writer instead of growing a buffer.
      socket.on('data', (chunk: Buffer) => {
        if (outgoing.writable && !outgoing.write(chunk)) socket.pause();
      });
      outgoing.on('drain', () => socket.resume());
      incoming.on('data', (chunk: Buffer) => {
        if (!socket.write(chunk)) incoming.pause();
      });
      socket.on('drain', () => incoming.resume());
      // The client ending its half is a TCP half-close; the guest's answer keeps flowing.
      incoming.on('end', () => socket.end());
      socket.on('end', () => {
        if (!outgoing.writable) return;
        // A client that does not end its half too is released with RST_STREAM NO_ERROR (as terminals do).
        const release = setTimeout(() => outgoing.stream?.close(http2.constants.NGHTTP2_NO_ERROR), 2000);
        release.unref();
        outgoing.once('close', () => clearTimeout(release));
        outgoing.end();
      });
      socket.on('error', () => {});
      // A reset or destroyed connection (no orderly end) resets the stream, so the peer sees it cut.
      socket.on('close', () => {
        if (!outgoing.writableEnded) outgoing.stream?.close(http2.constants.NGHTTP2_CONNECT_ERROR);
      });
      incoming.on('error', () => {});
      outgoing.on('error', () => {});

      await new Promise<void>((resolve) => {
        const gone = () => {
          socket.destroy();
          resolve();
        };
        if (outgoing.stream?.destroyed) gone();
        else outgoing.once('close', gone);
      });
      return RESPONSE_ALREADY_SENT;
    } finally {
      open--;
    }
  });
  return app;
}

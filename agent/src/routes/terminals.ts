import http2 from 'node:http2';
import { Hono } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { AGENT_ROUTES, PTY_EXIT_TRAILER } from '../../../shared/agent-protocol.js';
import { ROUTE_TEMPLATE, type AgentEnv, type NodeEnv } from '../http/env.js';
import { jsonBody } from '../http/body.js';
import { REQUEST_ID_HEADER } from '../http/errors.js';
import type { PtyManager } from '../pty/manager.js';
import { ERRORS } from '../errors.js';

const R = AGENT_ROUTES;

/**
 * POST/GET /terminals, DELETE /terminals/:term_id, POST .../resize, and the full-duplex attach:
 * one HTTP/2 stream whose request body is the pty's input and whose response body is its output.
 */
export function terminalsRoutes(mgr: PtyManager): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();

  app.post(R['terminals.open'].path, async (c) => {
    const req = await jsonBody(c, R['terminals.open'].body);
    return c.json(mgr.open(req));
  });
  app.get(R['terminals.list'].path, (c) => c.json({ terminals: mgr.list() }));
  app.delete(R['terminals.kill'].path, (c) => {
    mgr.kill(c.req.param('term_id'));
    return c.body(null, 204);
  });
  app.post(R['terminals.resize'].path, async (c) => {
    const id = c.req.param('term_id');
    mgr.get(id);
    const body = await jsonBody(c, R['terminals.resize'].body);
    return c.json(mgr.resize(id, body.cols, body.rows));
  });

  app.post(R['terminals.attach'].path, async (c) => {
    const env = c.env as NodeEnv | undefined;
    const id = c.req.param('term_id');
    if (!env?.incoming || !env.outgoing) {
      throw ERRORS.attachNeedsChannel();
    }
    const { incoming, outgoing } = env;
    // We answer outside Hono, so the request log learns the template here rather than after next().
    (incoming as unknown as Record<symbol, unknown>)[ROUTE_TEMPLATE] = R['terminals.attach'].path;

    // Refuse before the stream is taken over; from here to attach() nothing yields, so no one can slip in.
    if (mgr.get(id).attached) throw ERRORS.terminalAttached(id);
    outgoing.writeHead(200, {
      'content-type': 'application/octet-stream',
      'cache-control': 'no-store',
      [REQUEST_ID_HEADER]: c.get('requestId'),
    });
    // Send the headers now: the client learns it is attached before any output exists.
    (outgoing as unknown as { flushHeaders?: () => void }).flushHeaders?.();
    let finished = false;
    const handle = mgr.attach(id, {
      write: (chunk) => (outgoing.writable && !finished ? outgoing.write(chunk) : true),
      onDrain: (cb) => outgoing.on('drain', cb),
      end: (exitCode) => {
        if (finished) return;
        finished = true;
        if (!outgoing.writable) return;
        outgoing.addTrailers({ [PTY_EXIT_TRAILER]: String(exitCode) });
        // The answer is complete; a client ends its half when it sees that. One that does not is
        // released with RST_STREAM NO_ERROR, HTTP/2's "stop sending, we are done" (RFC 9113 §8.1).
        const release = setTimeout(() => outgoing.stream?.close(http2.constants.NGHTTP2_NO_ERROR), 2000);
        release.unref();
        outgoing.once('close', () => clearTimeout(release));
        outgoing.end();
      },
    });

    incoming.on('data', (chunk: Buffer) => handle.input(chunk));
    // The client ending its half only means "no more input"; the output keeps flowing.
    incoming.on('error', () => {});
    outgoing.on('error', () => {});

    // Hold the handler until the stream is gone, so the server adapter does not tear the stream down
    // as a finished request; closing (client or pty exit) detaches and leaves the pty running.
    await new Promise<void>((resolve) => {
      const gone = () => {
        handle.detach();
        resolve();
      };
      if (outgoing.stream?.destroyed) gone();
      else outgoing.once('close', gone);
    });
    return RESPONSE_ALREADY_SENT;
  });
  return app;
}

import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { matchedRoutes } from 'hono/route';
import { AGENT_ROUTES } from '../../shared/agent-protocol.js';
import { newId } from '../../shared/ids.js';
import { MAX_MACHINE_BODY_BYTES, MAX_WRITE_BODY_BYTES } from '../../shared/schemas/files.js';
import type { Enrollment } from './enrollment.js';
import { enrollHandler, requireKey } from './http/auth.js';
import { REQUEST_ID_HEADER, renderError } from './http/errors.js';
import type { LogSink } from './http/log.js';
import { ROUTE_TEMPLATE, type AgentEnv } from './http/env.js';
import { isAttachRequest, isTcpConnectRequest } from './http/streams.js';
import { ERRORS } from './errors.js';

export type { AgentEnv } from './http/env.js';

export interface AgentAppOptions {
  /** Who may enroll, and the key every other route requires. */
  enrollment: Enrollment;
  log: LogSink;
  /** Route groups (desktop, files, exec, terminals, secrets), each a Hono sub-app mounted at `/`. */
  mounts: Hono<AgentEnv>[];
}

export function createAgentApp(opts: AgentAppOptions): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();

  app.use('*', async (c, next) => {
    const given = c.req.header(REQUEST_ID_HEADER);
    const id = given && /^[A-Za-z0-9_.-]{1,64}$/.test(given) ? given : newId('request');
    c.set('requestId', id);
    c.header(REQUEST_ID_HEADER, id);
    try {
      await next();
    } finally {
      const incoming = (c.env as { incoming?: Record<symbol, unknown> } | undefined)?.incoming;
      if (incoming) {
        // The last route that is not a catch-all middleware (the enrollment route is matched before the gate).
        const tpl = matchedRoutes(c).map((r) => r.path).filter((p) => p !== '*' && p !== '/*').at(-1);
        incoming[ROUTE_TEMPLATE] = tpl ?? 'unmatched';
      }
    }
  });

  const enroll = AGENT_ROUTES['auth.enroll'];
  app.on(enroll.method, enroll.path, enrollHandler(opts.enrollment));
  // Security gate: nothing below this line runs without the key the control plane enrolled (enrollment.ts).
  app.use('*', requireKey(opts.enrollment));

  app.use('*', async (c, next) => {
    // A pty attach or TCP stream body is open-ended: a body limit would buffer it to the end, forever.
    if (isAttachRequest(c.req.method, c.req.path) || isTcpConnectRequest(c.req.method, c.req.path)) return next();
    const limit = c.req.method === 'PUT' && c.req.path === '/files/content' ? MAX_WRITE_BODY_BYTES : MAX_MACHINE_BODY_BYTES;
    return bodyLimit({
      maxSize: limit,
      onError: () => {
        throw ERRORS.bodyOverLimit(limit);
      },
    })(c, next);
  });

  for (const m of opts.mounts) app.route('/', m);

  app.notFound(() => {
    throw ERRORS.noSuchAgentRoute();
  });
  app.onError((err, c) => renderError(err, c, opts.log));
  return app;
}

/**
 * The control plane's HTTP app. Tests call `app.request()`; main.ts serves it with @hono/node-server.
 */
import { Hono } from 'hono';
import { cors } from 'hono/cors';
import type { Op } from './api/op.js';
import type { Routing } from './api/middleware/owner-route.js';
import { renderError } from './api/middleware/errors.js';
import { requestContext } from './api/middleware/request-context.js';
import { limitBodies } from './api/middleware/body-limit.js';
import { mountReference } from './api/reference.js';
import { mountDashboard } from './dashboard.js';
import { IDENTITY_OPS, v1App } from './api/v1/index.js';
import { MCP_PATH, mountMcp, type McpOptions } from './mcp/endpoint.js';
import type { CpEnv } from './context.js';
import type { LogSink } from './log.js';
import type { Services } from './services/index.js';
import { ERRORS } from './errors.js';

export interface AppDeps {
  services: Services;
  log: LogSink;
  /** Operations served under /v1 (default: this identity, tenancy and billing routes). */
  ops?: readonly Op[];
  /** Parse every JSON success answer against its operation's declared schema (tests). */
  checkResponses?: boolean;
  /** MCP session limits (tests). */
  mcp?: McpOptions;
  /** A dashboard build (dist/dashboard) to serve at `/`; none: `/` is a 404 like any unknown route. */
  dashboardDir?: string | null;
  /** Several processes on PostgreSQL: machine and host operations go to their owner (main.ts wires it). */
  routing?: Routing;
}

export function createApp(deps: AppDeps): Hono<CpEnv> {
  const app = new Hono<CpEnv>();
  app.use('*', requestContext(deps.log));
  // A dashboard served from an ALLOWED_ORIGINS host calls the API cross-origin with its cookie. Only
  // those origins get CORS answers; the public origin is same-origin and needs none.
  const allowed = deps.services.config.allowedOrigins;
  if (allowed.length) app.use(
    '*',
    cors({
      origin: (o) => (allowed.includes(o) ? o : null),
      credentials: true,
      allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      allowHeaders: ['content-type', 'authorization'],
      exposeHeaders: ['x-request-id', 'retry-after'],
      maxAge: 600,
    }),
  );
  app.use('*', limitBodies([MCP_PATH]));
  const ops = deps.ops ?? IDENTITY_OPS;
  mountReference(app, ops, `${deps.services.config.publicBaseUrl}`);
  app.route('/v1', v1App(deps.services, ops, { checkResponses: deps.checkResponses, routing: deps.routing }));
  // The MCP server's tools are /v1 requests dispatched back into this app (mcp/caller.ts).
  mountMcp(app, deps.services, (req, env) => app.fetch(req, env), deps.mcp);
  if (deps.dashboardDir) mountDashboard(app, deps.dashboardDir, deps.services.config.publicBaseUrl);
  app.notFound(() => {
    throw ERRORS.noSuchRoute();
  });
  app.onError((err, c) => renderError(err, c, deps.log));
  return app;
}

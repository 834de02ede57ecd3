import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

/** The Hono environment every agent route runs in (app.ts sets the request id). */
export type AgentEnv = { Variables: { requestId: string } };

/** The node request and response a streaming route takes over (present on the agent's HTTP/2 channel). */
export type NodeEnv = { incoming?: Http2ServerRequest; outgoing?: Http2ServerResponse };

/** Symbol under which the matched route template is left on the node request, for the request log. */
export const ROUTE_TEMPLATE = Symbol.for('computer.agent.route');

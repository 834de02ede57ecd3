/**
 * An agent request's path from its operation: the paths are spelled once, in `AGENT_ROUTES`
 * (shared/agent-protocol.ts); `:name` segments are filled from `params`, each URI-encoded.
 */
import { AGENT_ROUTES, type AgentOperation } from '../../../../shared/agent-protocol.js';

type ParamsIn<P extends string> = P extends `${string}:${infer N}/${infer R}` ? N | ParamsIn<`/${R}`> : P extends `${string}:${infer N}` ? N : never;

/** The `:name` segments of an operation's path, each a string or number. */
export type AgentParams<K extends AgentOperation> = Record<ParamsIn<(typeof AGENT_ROUTES)[K]['path']>, string | number>;

/** `query`: an encoded query string without its `?` (empty or absent: none). */
export function agentPath<K extends AgentOperation>(op: K, params?: AgentParams<K>, query?: string): string {
  const values: Record<string, string | number> = params ?? {};
  const path = AGENT_ROUTES[op].path.replace(/:([a-z_]+)/g, (_m, name: string) => encodeURIComponent(String(values[name])));
  return query ? `${path}?${query}` : path;
}

type StreamOperation = { [K in AgentOperation]: (typeof AGENT_ROUTES)[K] extends { stream: string } ? K : never }[AgentOperation];

/** How a long-lived stream is requested; method and duplex are the route's own. */
export interface StreamRequest {
  method: 'GET' | 'POST';
  path: string;
  duplex: boolean;
}

/** The request opening a stream operation (screen frames, a terminal attach, a TCP connection). */
export function streamRequest<K extends StreamOperation>(op: K, params?: AgentParams<K>, query?: string): StreamRequest {
  const route: { method: 'GET' | 'POST'; stream: 'duplex' | 'frames' } = AGENT_ROUTES[op];
  return { method: route.method, path: agentPath(op, params, query), duplex: route.stream === 'duplex' };
}

/** An operation's path parameters read by name (the proxy routes: from the public route's own segments). */
export function paramsOf<K extends AgentOperation>(op: K, read: (name: string) => string): AgentParams<K> {
  const out: Record<string, string> = {};
  for (const m of AGENT_ROUTES[op].path.matchAll(/:([a-z_]+)/g)) out[m[1]!] = read(m[1]!);
  // The names are exactly the path's `:name` segments, which is what AgentParams<K> spells at the type level.
  return out as AgentParams<K>;
}

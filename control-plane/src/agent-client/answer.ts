/**
 * Reads an agent's answer. The agent runs inside the guest, where the tenant is root and can replace it,
 * so an answer is untrusted input: a success body is parsed against its route's response schema in
 * shared/agent-protocol.ts (and re-serialised from the parsed value, so nothing unparsed reaches a
 * client), and an error envelope is parsed too and must carry a code the agent may use with that code's
 * status. Anything else is the machine failing, never the caller's fault and never a 500: 503
 * `compute_unavailable`.
 */
import { z } from 'zod';
import { AGENT_ROUTES, type AgentOperation } from '../../../shared/agent-protocol.js';
import { ERROR_STATUS, type ErrorCode } from '../../../shared/errors.js';
import type { AgentResponse } from './pool.js';
import { ERRORS } from '../errors.js';

/**
 * Codes an agent may answer with. `unauthenticated` would tell the API client that its own credential
 * is bad (it is the machine token the agent refused), and `quota_exceeded`/`rate_limited` belong to the
 * control plane's own accounting: an agent claiming them is treated as broken.
 */
const AGENT_CODES = ['invalid_request', 'permission_denied', 'not_found', 'conflict', 'precondition_failed', 'internal_error', 'unsupported_operation', 'compute_unavailable'] as const satisfies readonly ErrorCode[];

const AgentErrorEnvelope = z.object({
  error: z.object({
    code: z.enum(AGENT_CODES),
    message: z.string().max(2000),
    details: z.array(z.object({ field: z.string().max(200), message: z.string().max(1000) })).max(100).default([]),
  }),
});

/** The parsed success value of an agent operation: its response schema's output, or null (204). */
export type AgentAnswerOf<K extends AgentOperation> = (typeof AGENT_ROUTES)[K] extends { response: z.ZodType<infer T> } ? T : null;

function json(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * The parsed success value of `op` (null for a route answering 204 with no body), or throws: the
 * agent's own error as an AppError carrying its code, message and details, or 503 for anything malformed.
 */
export function readAgentAnswer<K extends AgentOperation>(op: K, res: Pick<AgentResponse, 'status' | 'body'>): AgentAnswerOf<K> {
  const route: { response?: z.ZodType<AgentAnswerOf<K>> } = AGENT_ROUTES[op] as { response?: z.ZodType<AgentAnswerOf<K>> };
  if (res.status >= 200 && res.status < 300) {
    if (!route.response) {
      if (res.status === 204) return null as AgentAnswerOf<K>;
      throw ERRORS.malformedAgentAnswer('an unexpected answer');
    }
    if (res.status !== 200) throw ERRORS.malformedAgentAnswer('an unexpected answer');
    const r = route.response.safeParse(json(res.body));
    if (!r.success) throw ERRORS.malformedAgentAnswer('a malformed answer');
    return r.data;
  }
  if (res.status === 401) throw ERRORS.agentCannotServe();
  const r = AgentErrorEnvelope.safeParse(json(res.body));
  if (!r.success || ERROR_STATUS[r.data.error.code] !== res.status) throw ERRORS.malformedAgentAnswer('a malformed error');
  const e = r.data.error;
  throw ERRORS.agentRefused(e);
}

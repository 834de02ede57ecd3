/**
 * Turns an agent's answer into the control plane's. Agent error envelopes pass through with the
 * control plane's request id; anything the client could not act on becomes 503 `compute_unavailable`.
 */
import { AppError, isErrorEnvelope, type ErrorEnvelope } from '../../../shared/errors.js';
import type { AgentResponse } from './pool.js';

export function relayAgentResponse(res: AgentResponse, requestId: string): Response {
  if (res.status === 204) return new Response(null, { status: 204 });
  if (res.status >= 200 && res.status < 300) {
    return new Response(new Uint8Array(res.body), { status: res.status, headers: { 'content-type': res.contentType ?? 'application/json' } });
  }
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(res.body.toString('utf8'));
  } catch {
    /* not JSON */
  }
  // The agent refusing the machine token is the control plane's problem, never the caller's
  // credential: answering 401 would tell the client its own key is bad.
  if (res.status === 401 || !isErrorEnvelope(parsed)) {
    throw new AppError('compute_unavailable', 'The machine agent could not serve the request.', { headers: { 'retry-after': '1' } });
  }
  const env = parsed as ErrorEnvelope;
  const body: ErrorEnvelope = {
    error: {
      code: env.error.code,
      message: typeof env.error.message === 'string' ? env.error.message : 'The machine agent refused the request.',
      request_id: requestId,
      details: Array.isArray(env.error.details) ? env.error.details : [],
      quota: null,
    },
  };
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  return new Response(JSON.stringify(body), { status: res.status, headers });
}

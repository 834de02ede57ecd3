/**
 * The machine-agent service: the one owner of "talk to a machine's agent". Every door (the `/v1` proxy
 * routes, the computer-tool endpoints, the gateway, previews, and through `/v1` MCP) and every service
 * that reaches an agent (display readiness, secrets delivery) goes through it:
 *
 *   target.ts   where a machine's agent lives (`agentOf`) and the running-state rule
 *   paths.ts    requests keyed by `AGENT_ROUTES` operation (paths spelled once, in shared/agent-protocol.ts)
 *   typing.ts   the secret-typing rule and the redaction of answers to a body that held a secret
 *   streams.ts  screen, pty and TCP streams on the machine's one session
 *   client.ts   the one import of `agent-client/`
 */
import { AppError } from '../../../../shared/errors.js';
import { ERRORS } from '../../errors.js';
import { AGENT_ROUTES, type AgentOperation } from '../../../../shared/agent-protocol.js';
import type { Store } from '../../store/store.js';
import type { AgentChannel } from '../../substrate/substrate.js';
import type { EventService } from '../events.js';
import { AgentPool, readAgentAnswer, type AgentAnswerOf, type AgentRequest, type AgentResponse } from './client.js';
import { agentPath, type AgentParams } from './paths.js';
import { createAgentStreams, type AgentStreamOptions, type AgentStreams } from './streams.js';
import { runningAgent, type AgentTarget } from './target.js';

export { agentOf, type AgentTarget } from './target.js';
export { agentPath, paramsOf, streamRequest, type StreamRequest } from './paths.js';
export { secretTypingBody } from './typing.js';
export type { AgentStreams } from './streams.js';
export { readAgentAnswer, readAgentError, AGENT_STREAM_WINDOW_BYTES, type AgentAnswerOf, type AgentResponse, type OpenedStream } from './client.js';

export interface MachineAgentDeps {
  store: Store;
  channel: AgentChannel;
  events: EventService;
  timeouts?: { connectMs?: number; requestMs?: number };
  /** Largest agent answer buffered (default agent-client/pool.ts DEFAULT_MAX_RESPONSE). */
  maxAnswerBytes?: number;
}

/** One call to an agent operation. */
export interface AgentCallOptions<K extends AgentOperation> {
  params?: AgentParams<K>;
  /** Encoded query string, without its `?`. */
  query?: string;
  /** JSON text of the agent's body. */
  body?: string;
  requestId?: string;
  timeoutMs?: number;
  /**
   * The body holds a secret's value: a refusal reaches the caller as its code with this fixed message
   * and no details (`ERRORS.redacted`).
   */
  sensitive?: string;
}

export function createMachineAgent(d: MachineAgentDeps) {
  const pool = new AgentPool({
    openChannel: (id) => d.channel.openChannel(id),
    issueEnrollment: (id) => d.channel.issueEnrollment(id),
    connectTimeoutMs: d.timeouts?.connectMs,
    requestTimeoutMs: d.timeouts?.requestMs,
    maxResponseBytes: d.maxAnswerBytes,
  });

  /** The agent's answer as sent (error envelopes included), for a door that parses its own. */
  function request<K extends AgentOperation>(target: AgentTarget, op: K, o: AgentCallOptions<K> = {}): Promise<AgentResponse> {
    return pool.request(target.id, target.token, {
      method: AGENT_ROUTES[op].method, path: agentPath(op, o.params, o.query), body: o.body, requestId: o.requestId, timeoutMs: o.timeoutMs,
    });
  }

  return {
    /** The pool of sessions (one HTTP/2 session per machine); for the operator's metrics and tests. */
    pool,

    /** The running machine's agent in the organization, or why it cannot be reached (404, 409, 503). */
    async running(orgId: string, machineId: string): Promise<AgentTarget> {
      const m = await d.store.machines.inOrg(orgId, machineId);
      if (!m) throw ERRORS.noSuchMachine();
      return runningAgent(m);
    },

    request,

    /** A request a door built by operation (`agentPath`), its answer as sent: the gateway parses its own. */
    forward: (target: AgentTarget, req: { method: AgentRequest['method']; path: string; body?: string }): Promise<AgentResponse> =>
      pool.request(target.id, target.token, req),

    /** One operation, its answer parsed against the route's schema (agent-client/answer.ts). */
    async call<K extends AgentOperation>(target: AgentTarget, op: K, o: AgentCallOptions<K> = {}): Promise<AgentAnswerOf<K>> {
      const res = await request(target, op, o);
      try {
        return readAgentAnswer(op, res);
      } catch (e) {
        if (o.sensitive === undefined || !(e instanceof AppError)) throw e;
        throw ERRORS.redacted(e, o.sensitive);
      }
    },

    /** A door's own set of long-lived streams over the machine sessions. */
    streams: (o: AgentStreamOptions): AgentStreams => createAgentStreams({ pool, events: d.events }, o),

    /** The machine's run ended or its session failed: the next use dials afresh. */
    drop: (machineId: string) => pool.drop(machineId),
  };
}
export type MachineAgent = ReturnType<typeof createMachineAgent>;

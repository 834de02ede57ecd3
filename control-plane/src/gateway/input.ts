/**
 * Input channel: pointer and keyboard messages, each carrying the lease fence it was sent under,
 * applied in arrival order through the agent's input routes.
 *
 * Security gate (fencing): every message is checked against the machine's current lease right before
 * it is forwarded. A message whose fence is lower or higher than the current one — or sent by a
 * session that no longer holds the lease — is dropped, the client gets exactly one `lease_lost`, and
 * from then on the socket is read-only: later input messages are ignored without an answer. A takeover
 * noticed through the lease watch does the same at once, so nothing queued behind it is applied.
 */
import { WebSocket, type RawData } from 'ws';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { INPUT_RATE_BURST, INPUT_RATE_PER_SECOND, InputMessage } from '../../../shared/schemas/gateway.js';
import type { OrgPrincipal } from '../context.js';
import { agentPath, readAgentAnswer, secretTypingBody } from '../services/machine-agent/index.js';
import type { GatewayDeps } from './deps.js';
import { TokenBucket } from './rate.js';
import { sendJson } from './send.js';

export interface InputLimits {
  ratePerSecond: number;
  burst: number;
  /** Accepted messages waiting for the agent beyond this are refused (the rate limit normally prevents it). */
  maxQueued: number;
  /** At most one `rate_limited` error per this many ms, so a flood is not answered with a flood. */
  rateNoticeMs: number;
}

export const DEFAULT_INPUT_LIMITS: InputLimits = {
  ratePerSecond: INPUT_RATE_PER_SECOND,
  burst: INPUT_RATE_BURST,
  maxQueued: 1000,
  rateNoticeMs: 1000,
};

function text(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export function serveInput(ws: WebSocket, deps: GatewayDeps, p: OrgPrincipal, machineId: string, sessionId: string, limits: Partial<InputLimits> = {}): void {
  const lim = { ...DEFAULT_INPUT_LIMITS, ...limits };
  const orgId = p.org_id;
  const bucket = new TokenBucket(lim.ratePerSecond, lim.burst);
  /** Read-only from the moment the loss is known; input arriving after that is ignored unanswered. */
  let readOnly = false;
  let notified = false;
  /** The fence the last applied message was checked under: a release of exactly that grant is a loss. */
  let heldFence: number | null = null;
  let lastRateNotice = -Infinity;
  let queued = 0;
  let chain: Promise<void> = Promise.resolve();

  const send = (msg: unknown) => sendJson(ws, deps.egress, machineId, msg);

  const notify = (current: number | null) => {
    if (notified) return;
    notified = true;
    send({ type: 'lease_lost', fence: current, message: 'This session no longer holds the input lease; input on this socket is ignored from now on.' });
  };

  const unwatch = deps.leases.watch(machineId, (released, fence) => {
    if (readOnly || released !== sessionId || heldFence === null || fence !== heldFence) return;
    readOnly = true;
    // Said after the message being applied right now (if any) is answered, so no `ack` ever follows
    // `lease_lost`; nothing queued behind it is applied.
    chain = chain.then(async () => {
      const c = await deps.leases.checkFence(p, machineId, sessionId, fence);
      notify(c.ok ? null : c.current);
    }).catch(() => undefined /* store closed: the socket is going away */);
  });
  ws.once('close', unwatch);

  const apply = async (msg: InputMessage): Promise<void> => {
    if (readOnly || ws.readyState !== WebSocket.OPEN) return;
    const check = await deps.leases.checkFence(p, machineId, sessionId, msg.fence);
    if (!check.ok) {
      readOnly = true;
      return notify(check.current);
    }
    heldFence = msg.fence;
    const { type, fence: _fence, id, ...body } = msg;
    let res;
    let sensitive = false;
    try {
      const agent = await toAgent(msg, body);
      sensitive = agent.sensitive;
      res = await deps.callAgent(orgId, machineId, { method: 'POST', path: agentPath(type), body: agent.body });
    } catch (e) {
      send({ type: 'error', id: id ?? null, code: e instanceof AppError ? e.code : 'internal_error', message: e instanceof AppError ? e.message : 'The input could not be applied.' });
      return;
    }
    // The agent's answer is parsed like every agent answer: a replaced agent cannot put anything else in an ack.
    let result: unknown;
    try {
      result = readAgentAnswer(type, res);
    } catch (e) {
      const err = e instanceof AppError ? e : ERRORS.inputNotApplied();
      // With a secret in the agent's body, a guest could echo it in an error: only the code reaches the client.
      if (sensitive) {
        const r = ERRORS.redacted(err, 'The machine could not type the secret.');
        send({ type: 'error', id: id ?? null, code: r.code, message: r.message });
      } else send({ type: 'error', id: id ?? null, code: err.code, message: err.message, details: err.details });
      return;
    }
    send({ type: 'ack', id: id ?? null, op: type, result });
  };

  /**
   * The agent's body; `sensitive` when it holds a secret's value. `keyboard.type` with `secret` is typed by
   * reference, as the /v1 route does it: the stored value goes from storage to the agent and nowhere else, and
   * no after-screenshot is taken (the field it was typed into may show it). An unknown secret throws its
   * AppError, answered as an `error`.
   */
  const toAgent = async (msg: InputMessage, body: Record<string, unknown>): Promise<{ body: string; sensitive: boolean }> => {
    const bySecret = msg.type === 'keyboard.type' ? await secretTypingBody(msg, (name) => deps.secretForTyping(orgId, machineId, name)) : null;
    return bySecret === null ? { body: JSON.stringify(body), sensitive: false } : { body: bySecret, sensitive: true };
  };

  ws.on('message', (data, isBinary) => {
    if (readOnly) return;
    if (!bucket.take()) {
      const now = performance.now();
      if (now - lastRateNotice >= lim.rateNoticeMs) {
        lastRateNotice = now;
        send({
          type: 'error', id: null, code: 'rate_limited',
          message: `Input is limited to ${lim.ratePerSecond} messages per second (bursts of ${lim.burst}) per socket; messages over the limit are dropped.`,
        });
      }
      return;
    }
    if (isBinary) {
      send({ type: 'error', id: null, code: 'invalid_request', message: 'Input messages are JSON text.' });
      return;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text(data));
    } catch {
      send({ type: 'error', id: null, code: 'invalid_request', message: 'Input messages are JSON text.' });
      return;
    }
    const r = InputMessage.safeParse(raw);
    if (!r.success) {
      const cid = (raw as { id?: unknown } | null)?.id;
      const details = r.error.issues.map((i) => ({ field: i.path.map(String).join('.') || '(message)', message: i.message }));
      send({
        type: 'error', id: typeof cid === 'string' ? cid : null, code: 'invalid_request',
        message: `Invalid input message: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`, details,
      });
      return;
    }
    if (queued >= lim.maxQueued) {
      send({ type: 'error', id: r.data.id ?? null, code: 'rate_limited', message: 'Too many input messages are waiting to be applied.' });
      return;
    }
    queued++;
    chain = chain.then(() => apply(r.data)).catch(() => {}).finally(() => {
      queued--;
    });
  });
}

/**
 * Builds a `/v1/machines/{machine_id}/…` operation that forwards to the same route on the machine's
 * agent (AGENT_ROUTES mirrors the public routes without the prefix). The request is validated here
 * with the shared schema first, so a bad body never crosses the channel and error paths match /v1; the
 * answer is parsed against the route's response schema (services/machine-agent), never relayed as is.
 */
import type { Context } from 'hono';
import { z } from 'zod';
import { AGENT_ROUTES, type AgentOperation } from '../../../../../shared/agent-protocol.js';
import { ERRORS } from '../../../errors.js';
import { isMachineId } from '../../../../../shared/ids.js';
import type { Permission } from '../../../../../shared/schemas/org.js';
import type { CpEnv } from '../../../context.js';
import type { Services } from '../../../services/index.js';
import { paramsOf } from '../../../services/machine-agent/index.js';
import { defineOp, type Op } from '../../op.js';

const NoQuery = z.strictObject({});
const PARAM_RE = /^[A-Za-z0-9_-]{1,64}$/;
/** Time the control plane allows beyond an exec's own timeout_ms for the answer to arrive. */
const EXEC_GRACE_MS = 10_000;

export interface ProxySpec {
  name: string;
  agent: AgentOperation;
  /** Writes need machines:control; reads need membership only. */
  permission?: Permission;
  /** Input routes: the caller's session must hold the input lease (X-Session-Id, optional X-Lease-Fence). */
  lease?: boolean;
  /** Per-request deadline from the validated body (exec waits as long as its own timeout). */
  timeoutMs?: (body: unknown) => number | undefined;
  /** Inspect a successful, already parsed answer (display: a desktop that is not up is 503). */
  check?: (answer: unknown) => void;
  /** The public body when it differs from the agent's (keyboard type by secret reference). */
  body?: z.ZodType;
  /**
   * Turns the validated public body into the agent's. `sensitive`: the agent's body holds a value the
   * caller must never see (a secret): an agent error reaches the caller as its code with a fixed message
   * and no details, so not even a hostile guest can echo the value back (success answers are always
   * reduced to the route's schema).
   */
  toAgent?: (body: any, c: Context<CpEnv>, s: Services) => Promise<{ body: string; sensitive: boolean }>;
  /**
   * A further permission the validated request needs (files as `user: root` need machines:control
   * even where the route itself needs only membership).
   */
  needs?: (query: unknown, body: unknown) => Permission | undefined;
}

/**
 * Sends a machine's answer (what its agent produced: exec output, a screenshot, file contents, …) and
 * counts its body bytes as that machine's egress (docs/usage-and-billing.md, "What egress counts").
 */
export function meteredAnswer(c: Context<CpEnv>, s: Services, machineId: string, answer: unknown): Response {
  const text = JSON.stringify(answer);
  s.metering.egress.add(machineId, Buffer.byteLength(text));
  return c.body(text, 200, { 'content-type': 'application/json' });
}

/** Input routes: the caller's session (X-Session-Id) holds the machine's input lease (optional X-Lease-Fence). */
export async function checkInputLease(c: Context<CpEnv>, s: Services, machineId: string): Promise<void> {
  await s.leases.checkInput(c.get('orgPrincipal'), machineId, c.req.header('x-session-id'), c.req.header('x-lease-fence'));
}

export function machineIdParam(c: Context<CpEnv>): string {
  const id = c.req.param('machine_id') ?? '';
  if (!isMachineId(id)) throw ERRORS.noSuchMachine();
  return id;
}

export function proxyOp(spec: ProxySpec): Op {
  const route: { method: 'GET' | 'POST' | 'PUT' | 'DELETE'; path: string; query?: z.ZodType; body?: z.ZodType; response?: z.ZodType } =
    AGENT_ROUTES[spec.agent];
  const publicBody = spec.body ?? route.body;
  const methods = { GET: 'get', POST: 'post', PUT: 'put', DELETE: 'delete' } as const;
  return defineOp({
    name: spec.name,
    method: methods[route.method],
    path: `/machines/:machine_id${route.path}`,
    auth: 'any',
    permission: spec.permission,
    query: route.query ?? NoQuery,
    body: publicBody,
    // An agent route without a response schema answers 204 (terminals.kill).
    responses: route.response ? { 200: route.response } : { 204: 'empty' },
    async handler(c, s: Services, io) {
      const p = c.get('orgPrincipal');
      const machineId = machineIdParam(c);
      // Existence and state first: another organization's machine is 404 whatever the body says.
      await s.agent.running(p.org_id, machineId);
      const query = io.query();
      let body: unknown;
      let raw: string | undefined;
      if (publicBody) {
        body = await io.body();
        raw = await c.req.text();
        if (!raw.length) raw = '{}';
      }
      // Security gate: acting as root in the guest is control, whatever the route's own permission.
      const needed = spec.needs?.(query, body);
      if (needed && !p.permissions.has(needed)) throw ERRORS.needsPermission(needed);
      if (spec.lease) await checkInputLease(c, s, machineId);
      let sensitive = false;
      if (spec.toAgent) ({ body: raw, sensitive } = await spec.toAgent(body, c, s));
      const params = paramsOf(spec.agent, (name) => {
        const v = c.req.param(name) ?? '';
        if (!PARAM_RE.test(v)) throw ERRORS.noSuchPathItem(name.replace('_id', ''));
        return v;
      });
      const search = new URL(c.req.url).search;
      // The answer is parsed against the route's schema: a replaced agent cannot hand the client anything else.
      const answer: unknown = await s.agent.call(await s.agent.running(p.org_id, machineId), spec.agent, {
        params,
        query: route.query && search ? search.slice(1) : undefined,
        body: raw,
        requestId: c.get('requestId'),
        timeoutMs: spec.timeoutMs?.(body),
        sensitive: sensitive ? 'The machine could not carry out the request with the secret.' : undefined,
      });
      if (answer === null) return c.body(null, 204);
      spec.check?.(answer);
      return meteredAnswer(c, s, machineId, answer);
    },
  });
}

/** Files routes as `user: root` need machines:control (reads as the agent user need membership only). */
export const rootNeedsControl = (query: unknown, body: unknown): Permission | undefined => {
  const user = (query as { user?: unknown } | undefined)?.user ?? (body as { user?: unknown } | undefined)?.user;
  return user === 'root' ? 'machines:control' : undefined;
};

export const execTimeout = (body: unknown): number | undefined => {
  const t = (body as { timeout_ms?: unknown } | undefined)?.timeout_ms;
  return typeof t === 'number' ? t + EXEC_GRACE_MS : undefined;
};

/** Spec rule: display and screen routes answer compute_unavailable until the desktop is up. */
export const desktopUp = (json: unknown): void => {
  const d = (json as { up?: unknown; display?: { up?: unknown } } | null) ?? {};
  const up = 'up' in d ? d.up : d.display?.up;
  if (up === false) throw ERRORS.desktopNotUp();
};

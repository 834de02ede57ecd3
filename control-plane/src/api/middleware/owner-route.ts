/**
 * The API's door to the internal channel (docs/cluster.md, "What forwards"): after `authenticate` and `requireOrg`,
 * an operation that acts on a machine or on the host's substrate is served here only if this process owns it;
 * otherwise the caller's request is forwarded to the owner's internal listener with the tenant's credentials dropped
 * and the principal asserted (cluster/forward), and the owner's answer is the caller's.
 * A request that arrived over the channel is never forwarded again (forward/owner.ts's table: 503 instead).
 *
 * - `machine` operations (`routeToOwner`): streamed both ways to the driver of the machine's host.
 * - `host` operations (`routeToHost`, after the permission): the body (small JSON, under the body limit) is read
 *   once, parsed with the operation's schema (a malformed one is the handler's 400, answered where it arrives), and
 *   the operation's `HostChoice` names the hosts it may go to (services/placement.ts `hostsFor`: an unknown region
 *   400 and no room 503 answered here). They are tried in rank order, at most `HOST_TRIES`: the driver of each
 *   gets the read bytes and its answer is held whole (up to `HOST_ANSWER_LIMIT`) to decide; a driver that cannot be
 *   reached before its connection opens, or whose locked re-check refused (marked by `REFUSED_HEADER`, which never
 *   reaches the caller), passes to the next; any other answer is the caller's.
 */
import { Readable } from 'node:stream';
import type { Context, MiddlewareHandler, Next } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { CpEnv } from '../../context.js';
import { tenantCall } from '../../cluster/forward/tenant-call.js';
import type { DialedRequest, ForwardCall } from '../../cluster/forward/call.js';
import type { Routing } from '../../cluster/routing.js';
import { OWNER_REFUSED_HEADER } from '../../cluster/forward/headers.js';
import { ERRORS } from '../../errors.js';
import { decideRoute, route, type Arrival, type RemoteOwner } from '../../cluster/forward/owner.js';
import { isPlacementRefusal, placementRefusal, type HostChoice } from '../../services/placement.js';
import { clientIp } from './client-ip.js';

/** What an operation acts on, for routing: a machine (its `:machine_id`), the host's substrate (a create), or neither. */
export type OpOwner = 'machine' | 'host' | 'any';

export type { Routing } from '../../cluster/routing.js';

/**
 * Whether `c` is the request the node server received (not one dispatched in-process with its bindings, as the MCP
 * endpoint's tools are): only that one has a socket to stream to the owner.
 */
function isWireRequest(c: Context<CpEnv>): boolean {
  const u = new URL(c.req.url);
  return c.env?.incoming?.url === u.pathname + u.search && c.env.outgoing !== undefined && !c.env.outgoing.headersSent;
}

/** How many of the ranked hosts a `host` operation is offered, at most, before its last answer is the caller's. */
export const HOST_TRIES = 3;
/** The most of a host's answer held to decide whether to try the next host (a machine is a few KB). */
export const HOST_ANSWER_LIMIT = 256 * 1024;
/** Set by the chosen host's process on an answer that refused before recording anything; stripped before the caller. */
export const REFUSED_HEADER = 'x-computer-placement';

/** The forward of `c` to `target` (cluster/forward/tenant-call.ts). */
function forwardCall(c: Context<CpEnv>, routing: Routing, target: RemoteOwner): ForwardCall {
  return tenantCall(target, {
    principal: c.get('orgPrincipal'),
    requestId: c.get('requestId'),
    host: c.req.header('host'),
    ip: clientIp(c, routing.trustProxy),
    proto: new URL(c.req.url).protocol === 'https:' ? 'https' : 'http',
  }, routing.publicHost);
}

/** A body up to this size is read before a forward to a remembered owner, so that a refusal can be sent on again. */
export const REPLAY_LIMIT = 64 * 1024;

/** Whether the request's body (none, or a small one of a stated length) can be held and sent a second time. */
function replayable(c: Context<CpEnv>): boolean {
  if (c.req.header('transfer-encoding') !== undefined) return false;
  const length = Number(c.req.header('content-length') ?? '0');
  return Number.isSafeInteger(length) && length <= REPLAY_LIMIT;
}

export function routeToOwner(routing: Routing, o: { onLostHost?: 'serve_here' } = {}): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const arrival: Arrival = c.env?.forwarded ? 'forwarded' : 'tenant';
    const machineId = c.req.param('machine_id') ?? null;
    const incoming = c.env?.incoming;
    const outgoing = c.env?.outgoing;
    const wire = incoming && outgoing && isWireRequest(c) ? { incoming, outgoing } : null;
    // A remembered owner (cluster/owner-cache.ts) is tried first, the body held so a refusal can be routed again.
    const remembered = machineId && arrival === 'tenant' && wire && replayable(c) ? routing.owners.get(machineId) : null;
    let held: Buffer | null = null;
    if (machineId && wire && remembered) {
      // A GET's or HEAD's Request has no body: not built just to read none (api/middleware/body-limit.ts).
      held = c.req.method === 'GET' || c.req.method === 'HEAD' ? Buffer.alloc(0) : Buffer.from(await c.req.arrayBuffer());
      c.set('forwardedTo', remembered.processId);
      const settled = await routing.forwarder.attempt(wire.incoming, wire.outgoing, forwardCall(c, routing, remembered), held.length ? held : undefined);
      if (settled === 'answered') return RESPONSE_ALREADY_SENT.clone();
      routing.owners.delete(machineId);
    }
    const r = await route(routing.ownerOf, machineId, arrival);
    if (r.kind === 'serve') return next();
    if (r.kind === 'refuse') {
      if (o.onLostHost === 'serve_here' && machineId && (await routing.onDownHost(machineId).catch(() => false))) return next();
      // Refused before anything was done here: marked, so the process that forwarded it may route it again.
      if (arrival === 'forwarded') c.header(OWNER_REFUSED_HEADER, 'refused');
      throw r.error;
    }
    if (machineId) routing.owners.set(machineId, r.target);
    const call = forwardCall(c, routing, r.target);
    c.set('forwardedTo', r.target.processId);
    // A request dispatched inside the process (the MCP endpoint's tools) has no socket of its own: it crosses as a
    // web Request and the owner's answer comes back as a web Response.
    if (!wire) return routing.forwarder.fetch(c.req.raw, call);
    // The body is read from the app's Request, never from the socket: the body limit (app.ts) has already made it
    // (and may have wrapped it to count), which reads the socket into its stream; that stream keeps the backpressure.
    const raw = c.req.raw.body;
    const body = held ? (held.length ? held : undefined) : raw ? Readable.fromWeb(raw) : undefined;
    routing.forwarder.request(wire.incoming, wire.outgoing, call, body);
    return RESPONSE_ALREADY_SENT.clone();
  };
}

/**
 * What the buffered forward reads of the request: the socket's, or — for a request made inside the process (the MCP
 * endpoint's tools) — its method, path and headers, framed by the bytes already read.
 */
function dialedOf(c: Context<CpEnv>, body: Buffer): DialedRequest {
  if (isWireRequest(c) && c.env?.incoming) return c.env.incoming;
  const u = new URL(c.req.url);
  const framing = new Set(['content-length', 'transfer-encoding']);
  const rawHeaders = [...c.req.raw.headers].filter(([name]) => !framing.has(name)).flat();
  return { method: c.req.method, url: u.pathname + u.search, rawHeaders: [...rawHeaders, 'content-length', String(body.length)] };
}

/** The held answer of a host as the caller's Response (the refusal mark and the framing left out). */
function answerOf(a: { status: number; headers: string[]; body: Buffer }): Response {
  const headers = new Headers();
  for (let i = 0; i + 1 < a.headers.length; i += 2) {
    const name = a.headers[i]!.toLowerCase();
    if (name !== REFUSED_HEADER && name !== 'content-length') headers.append(name, a.headers[i + 1]!);
  }
  return new Response(a.status === 204 || a.status === 304 ? null : new Uint8Array(a.body), { status: a.status, headers });
}

/** Replaces the answer already made (the local handler's) with `res`, none of its headers kept. */
function replaceAnswer(c: Context<CpEnv>, res: Response): void {
  c.error = undefined;
  c.res = undefined;
  c.res = res;
}

/**
 * A `host` operation (see the header): `choose` reads the operation's `HostChoice` from its parsed body. On the
 * chosen host's process (arrived forwarded) it is served if this process drives its host, else refused as a placement
 * refusal; either way a refusal is marked for the process that sent it.
 */
export function routeToHost(routing: Routing, choose: (c: Context<CpEnv>) => Promise<HostChoice>): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    if (c.env?.forwarded) return servedOnHost(c, next, routing);
    // Read once, here: the handler's parse (served here) reads the same cached bytes.
    const body = Buffer.from(await c.req.arrayBuffer());
    const placement = await routing.hostsFor(c.get('orgPrincipal').org_id, await choose(c));
    const hosts = (placement.kind === 'anywhere' ? [routing.hostId] : placement.ranked).slice(0, HOST_TRIES);
    let last: Response | null = null;
    for (const [i, hostId] of hosts.entries()) {
      const final = i === hosts.length - 1;
      const owner = await routing.ownerOfHost(hostId).catch(() => null);
      if (!owner) continue;
      if (owner.kind === 'local') {
        await next();
        if (final || !isPlacementRefusal(c.error)) return;
        last = c.res;
        continue;
      }
      const a = await routing.forwarder.buffered(dialedOf(c, body), forwardCall(c, routing, owner), body, HOST_ANSWER_LIMIT);
      if (a.kind === 'unreached') continue;
      c.set('forwardedTo', owner.processId);
      if (a.kind === 'lost') throw ERRORS.machineOwnerUnreachable();
      last = answerOf(a);
      if (final || a.headers.every((h, k) => k % 2 === 1 || h.toLowerCase() !== REFUSED_HEADER)) break;
    }
    if (!last) throw ERRORS.machineOwnerUnreachable();
    replaceAnswer(c, last);
    return c.res;
  };
}

/** On the host's process: served if this process drives its host now, else a placement refusal (nothing done). */
async function servedOnHost(c: Context<CpEnv>, next: Next, routing: Routing): Promise<void> {
  const r = decideRoute(await routing.ownerOfHost(routing.hostId).catch(() => null), 'forwarded');
  if (r.kind !== 'serve') throw placementRefusal(r.kind === 'refuse' ? r.error : ERRORS.machineOwnerMoved());
  await next();
}

/**
 * Outermost for a `host` operation, on the process a create was forwarded to: an answer that is a placement refusal
 * (services/placement.ts) is marked so the sending process may try its next host.
 */
export const markRefusals: MiddlewareHandler<CpEnv> = async (c, next) => {
  await next();
  if (c.env?.forwarded && isPlacementRefusal(c.error)) c.header(REFUSED_HEADER, 'refused');
};

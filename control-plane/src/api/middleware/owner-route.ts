/**
 * The API's door to the internal channel (docs/cluster.md, "What forwards"): after `authenticate` and `requireOrg`,
 * an operation that acts on a machine or on the host's substrate is served here only if this process owns it;
 * otherwise the caller's request is forwarded, streamed, to the owner's internal listener with the tenant's
 * credentials dropped and the principal asserted (cluster/forward), and the owner's answer is the caller's.
 * A request that arrived over the channel is never forwarded again (forward/owner.ts's table: 503 instead).
 */
import { Readable } from 'node:stream';
import type { Context, MiddlewareHandler } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { CpEnv } from '../../context.js';
import { Assertion, tenantAssertion } from '../../cluster/forward/assertion.js';
import type { ForwardCall } from '../../cluster/forward/call.js';
import type { Forwarder } from '../../cluster/forward/forwarder.js';
import { decideRoute, route, type Arrival, type Owner, type OwnerOf } from '../../cluster/forward/owner.js';
import { clientIp } from './client-ip.js';

/** What an operation acts on, for routing: a machine (its `:machine_id`), the host's substrate (a create), or neither. */
export type OpOwner = 'machine' | 'host' | 'any';

/** The cluster's side of routing, wired by main.ts on PostgreSQL (absent on SQLite: one process serves all). */
export interface Routing {
  ownerOf: OwnerOf;
  /**
   * Where an operation that makes a machine or acts on the substrate without naming a machine runs: today this
   * process's host's driver. Placement over many hosts replaces this one function.
   */
  placeFor(): Promise<Owner>;
  /** Whether a machine is recorded on a host that is down (for `onLostHost` operations). */
  onDownHost(machineId: string): Promise<boolean>;
  forwarder: Forwarder;
  trustProxy: boolean;
  /** The Host asserted when the caller's cannot be carried (malformed): the public base URL's. */
  publicHost: string;
}

const HostText = Assertion.shape.client.shape.host;
const IpText = Assertion.shape.client.shape.ip;

/**
 * Whether `c` is the request the node server received (not one dispatched in-process with its bindings, as the MCP
 * endpoint's tools are): only that one has a socket to stream to the owner.
 */
function isWireRequest(c: Context<CpEnv>): boolean {
  const u = new URL(c.req.url);
  return c.env?.incoming?.url === u.pathname + u.search && c.env.outgoing !== undefined && !c.env.outgoing.headersSent;
}

export function routeToOwner(routing: Routing, owner: Exclude<OpOwner, 'any'>, o: { onLostHost?: 'serve_here' } = {}): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const arrival: Arrival = c.env?.forwarded ? 'forwarded' : 'tenant';
    const machineId = owner === 'machine' ? c.req.param('machine_id') ?? null : null;
    const r = owner === 'machine'
      ? await route(routing.ownerOf, machineId, arrival)
      : decideRoute(await routing.placeFor().catch(() => null), arrival);
    if (r.kind === 'serve') return next();
    if (r.kind === 'refuse') {
      if (o.onLostHost === 'serve_here' && machineId && (await routing.onDownHost(machineId).catch(() => false))) return next();
      throw r.error;
    }
    const host = c.req.header('host') ?? '';
    const ip = clientIp(c, routing.trustProxy);
    const call: ForwardCall = {
      target: r.target,
      authorization: 'drop',
      assertion: {
        on_behalf_of: tenantAssertion(c.get('orgPrincipal')),
        request_id: c.get('requestId'),
        client: {
          ip: IpText.safeParse(ip).success ? ip : 'unknown',
          proto: new URL(c.req.url).protocol === 'https:' ? 'https' : 'http',
          host: HostText.safeParse(host).success ? host : routing.publicHost,
        },
      },
    };
    c.set('forwardedTo', r.target.processId);
    const incoming = c.env?.incoming;
    const outgoing = c.env?.outgoing;
    // A request dispatched inside the process (the MCP endpoint's tools) has no socket of its own: it crosses as a
    // web Request and the owner's answer comes back as a web Response.
    if (!incoming || !outgoing || !isWireRequest(c)) return routing.forwarder.fetch(c.req.raw, call);
    // The body is read from the app's Request, never from the socket: the body limit (app.ts) has already made it
    // (and may have wrapped it to count), which reads the socket into its stream; that stream keeps the backpressure.
    const raw = c.req.raw.body;
    routing.forwarder.request(incoming, outgoing, call, raw ? Readable.fromWeb(raw) : undefined);
    return RESPONSE_ALREADY_SENT.clone();
  };
}

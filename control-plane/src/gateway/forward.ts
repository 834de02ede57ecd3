/**
 * Where an admitted channel is served, when several control-plane processes share the deployment
 * (docs/cluster.md): here, or forwarded to the process that drives the machine's host. The decision is the
 * forward's table (cluster/forward/owner.ts `route`); this file turns it into the call the forwarder makes.
 */
import type { IncomingMessage } from 'node:http';
import { tenantAssertion } from '../cluster/forward/assertion.js';
import type { ForwardCall } from '../cluster/forward/call.js';
import { callerOf } from '../cluster/forward/caller.js';
import { route } from '../cluster/forward/owner.js';
import type { OrgPrincipal } from '../context.js';
import { ERRORS } from '../errors.js';
import type { GatewayForwarding } from './deps.js';

/**
 * Who opens a channel: a caller on the tenant-facing port, authenticated here by its key or cookie; or one another
 * process of the deployment authenticated and forwarded, whose signed assertion is the principal (no credential
 * crossed, so there is nothing to authenticate again).
 */
export type ChannelCaller = { arrival: 'tenant' } | { arrival: 'forwarded'; principal: OrgPrincipal };

export type ChannelRoute = { kind: 'serve' } | { kind: 'forward'; call: ForwardCall };

/**
 * Serve here, or forward as `p` with the caller's Authorization dropped. Throws the refusal (AppError): the
 * owner unknown or unreachable, a forwarded channel whose machine moved meanwhile (never a second hop), a Host
 * that cannot be asserted. Without `forwarding` every channel is served here.
 */
export async function channelRoute(
  forwarding: GatewayForwarding | undefined,
  req: IncomingMessage,
  machineId: string,
  p: OrgPrincipal,
  caller: ChannelCaller,
  requestId: string,
): Promise<ChannelRoute> {
  if (!forwarding) return { kind: 'serve' };
  const where = await route(forwarding.ownerOf, machineId, caller.arrival);
  if (where.kind === 'refuse') throw where.error;
  if (where.kind === 'serve') return where;
  const client = callerOf(req, forwarding.caller);
  if (!client) throw ERRORS.callerNotForwardable();
  return {
    kind: 'forward',
    call: { target: where.target, assertion: { on_behalf_of: tenantAssertion(p), request_id: requestId, client }, authorization: 'drop' },
  };
}

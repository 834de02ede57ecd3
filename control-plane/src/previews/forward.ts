/**
 * Where an admitted preview connection is served when several control-plane processes share the deployment
 * (docs/cluster.md): here, or at the process that drives the machine's host, forwarded as the preview's visitor
 * with the caller's Authorization dropped when it was the preview's own secret and kept when it is the guest
 * app's. The decision is the forward's table (cluster/forward/owner.ts `route`).
 */
import type { IncomingMessage } from 'node:http';
import type { ForwardCall } from '../cluster/forward/call.js';
import { callerOf } from '../cluster/forward/caller.js';
import { route, type Arrival } from '../cluster/forward/owner.js';
import { ERRORS } from '../errors.js';
import type { PreviewRow } from '../store/repos/previews.js';
import type { ForwardedVisitor, PreviewProxyDeps } from './deps.js';
import { NOT_FOUND, OWNER_AWAY, refusal, type Refusal } from './refusals.js';

export type PreviewRoute = { kind: 'serve' } | { kind: 'forward'; call: ForwardCall } | Refusal;

export async function previewRoute(
  deps: PreviewProxyDeps,
  req: IncomingMessage,
  row: PreviewRow,
  arrival: Arrival,
  o: { dropAuthorization: boolean; requestId: string },
): Promise<PreviewRoute> {
  if (!deps.forwarding) return { kind: 'serve' };
  const where = await route(deps.forwarding.ownerOf, row.machine_id, arrival);
  if (where.kind === 'refuse') return OWNER_AWAY(where.error);
  if (where.kind === 'serve') return where;
  const client = callerOf(req, { trustProxy: deps.trustProxy, proto: deps.secureCookies ? 'https' : 'http' });
  if (!client) return refusal(ERRORS.callerNotForwardable(), 'Preview error');
  return {
    kind: 'forward',
    call: {
      target: where.target,
      assertion: { on_behalf_of: { kind: 'preview', preview_id: row.id }, request_id: o.requestId, client },
      authorization: o.dropAuthorization ? 'drop' : 'keep',
    },
  };
}

/**
 * A forwarded visitor's preview, looked up again where it is served (serve-request.ts `serveForwardedRequest`, and
 * serve-upgrade.ts's): its row, or the page to answer — unpublished meanwhile (not found), or the machine's owner
 * changed in flight (the channel's 503; never a second hop).
 */
export async function forwardedPreview(deps: PreviewProxyDeps, req: IncomingMessage, v: ForwardedVisitor): Promise<{ row: PreviewRow } | Refusal> {
  const row = await deps.ports.resolve(v.previewId);
  if (!row) return NOT_FOUND();
  const where = await previewRoute(deps, req, row, 'forwarded', { dropAuthorization: false, requestId: v.requestId });
  return 'err' in where ? where : { row };
}

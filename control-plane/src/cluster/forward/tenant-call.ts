/**
 * The forward of a tenant's request (docs/cluster.md, "What is signed"): to the owner, the tenant's credentials
 * dropped, the principal and the caller asserted. One builder for both doors a tenant's request forwards from: the
 * API's owner route (api/middleware/owner-route.ts) and the short way in (api/forward-front.ts).
 */
import type { OrgPrincipal } from '../../context.js';
import { ASSERTED_HOST, assertableIp, tenantAssertion } from './assertion.js';
import type { ForwardCall } from './call.js';
import type { RemoteOwner } from './owner.js';

/** What the arriving process knows of the caller it authenticated. */
export interface TenantArrival {
  principal: OrgPrincipal;
  requestId: string;
  /** The caller's Host header, as sent (absent or malformed: `publicHost` is asserted). */
  host: string | undefined;
  /** The caller's address (api/middleware/client-ip.ts). */
  ip: string;
  proto: 'http' | 'https';
}

export function tenantCall(target: RemoteOwner, a: TenantArrival, publicHost: string): ForwardCall {
  return {
    target,
    authorization: 'drop',
    assertion: {
      on_behalf_of: tenantAssertion(a.principal),
      request_id: a.requestId,
      client: {
        ip: assertableIp(a.ip) ? a.ip : 'unknown',
        proto: a.proto,
        host: a.host !== undefined && ASSERTED_HOST.test(a.host) ? a.host : publicHost,
      },
    },
  };
}

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Permission, Role, Scope } from '../../shared/schemas/org.js';

/** For whom a request forwarded by another process acts: a tenant's principal, or a preview's admitted visitor. */
export type OnBehalfOf = { kind: 'tenant'; principal: OrgPrincipal } | { kind: 'preview'; preview_id: string };

/**
 * What a process knows of a request another process of the deployment forwarded to it (cluster/forward/listener.ts
 * verifies the signature and builds it), besides the request itself.
 */
export interface Forwarded {
  /** The forwarding process's id. */
  sender: string;
  request_id: string;
  /** The caller as the arriving process saw it (assertion.ts `AssertedClient`). */
  client: { ip: string; proto: 'http' | 'https'; host: string };
  on_behalf_of: OnBehalfOf;
}

/**
 * Who is calling. A key acts as its creator narrowed by its scopes; `permissions` is already the
 * effective set (role permissions, or scopes ∩ creator's current role permissions for a key).
 */
export interface Principal {
  kind: 'user' | 'api_key';
  user_id: string;
  auth_session_id: string | null;
  api_key_id: string | null;
  /** The organization the request acts in; null only for a user who belongs to none. */
  org_id: string | null;
  role: Role | null;
  scopes: Scope[] | null;
  permissions: ReadonlySet<Permission>;
  /** Authenticated by the session cookie (so subject to the Origin check on writes). */
  via_cookie: boolean;
}

/** A principal acting in an organization: what `requireOrg` admits, and what org-scoped services take. */
export type OrgPrincipal = Principal & { org_id: string };

/** Narrows a principal to one acting in an organization (a user who belongs to none is not). */
export function actsInOrg(p: Principal): p is OrgPrincipal {
  return !!p.org_id;
}

export type CpEnv = {
  Variables: {
    requestId: string;
    /** Operation name, e.g. `api_keys.create`: the RBAC key and the request log's field. */
    operation: string;
    principal: Principal;
    /** The same principal, set by `requireOrg` once it is known to act in an organization. */
    orgPrincipal: OrgPrincipal;
    /** The process a request was forwarded to (api/middleware/owner-route.ts), for the request log. */
    forwardedTo: string;
  };
  Bindings: {
    /** Set by @hono/node-server. */
    incoming?: IncomingMessage;
    /** Set by @hono/node-server: the response a forwarded request's owner answers on (owner-route.ts). */
    outgoing?: ServerResponse;
    /**
     * Set only by the internal listener (main.ts): the request crossed the channel, signed; its principal is the
     * asserted one (authenticate reads it instead of credentials) and it is never forwarded again.
     */
    forwarded?: Forwarded;
    /** Tests using app.request() inject the client address here. */
    clientIp?: string;
  };
};

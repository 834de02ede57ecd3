/**
 * The principal assertion: who a forwarded request acts for, as the process that authenticated the caller saw it.
 * The forwarding process strips every tenant credential (headers.ts), so this signed header is all the receiving
 * process knows of the caller: it rebuilds the principal from it and from nothing else. Canonical JSON (keys
 * sorted, no spaces), carried as base64url, covered by the signature (signature.ts).
 */
import { z } from 'zod';
import { Permission, Role, Scope } from '../../../../shared/schemas/org.js';
import type { OrgPrincipal } from '../../context.js';

/** The base64url header value's bound: far above a real assertion (~1 KiB with every permission and scope). */
export const MAX_ASSERTION_CHARS = 8192;

const Id = (prefix: string) => z.string().regex(new RegExp(`^${prefix}_[0-9a-z]{1,64}$`));

/** A caller of /v1 or the gateway, authenticated (key or session cookie) and acting in an organization. */
const TenantAssertion = z.strictObject({
  kind: z.literal('tenant'),
  principal_kind: z.enum(['user', 'api_key']),
  user_id: Id('usr'),
  auth_session_id: Id('aus').nullable(),
  api_key_id: Id('key').nullable(),
  org_id: Id('org'),
  role: Role.nullable(),
  scopes: z.array(Scope).max(64).nullable(),
  permissions: z.array(Permission).max(64),
  via_cookie: z.boolean(),
});

/** A visitor of a preview hostname, admitted by that preview's credential (or its being public) where it arrived. */
const PreviewAssertion = z.strictObject({
  kind: z.literal('preview'),
  preview_id: Id('prv'),
});

/** The caller as the arriving process saw it (caller.ts builds it). */
export const AssertedClient = z.strictObject({
  ip: z.string().min(1).max(64),
  proto: z.enum(['http', 'https']),
  host: z.string().min(1).max(255).regex(/^[A-Za-z0-9.:[\]_-]+$/),
});
export type AssertedClient = z.infer<typeof AssertedClient>;

export const Assertion = z.strictObject({
  on_behalf_of: z.discriminatedUnion('kind', [TenantAssertion, PreviewAssertion]),
  /** The request id the caller sees (in `x-request-id` and error envelopes), so one request keeps one id. */
  request_id: Id('req'),
  /** The caller as the arriving process saw it: its address (rate limits, X-Forwarded-For), scheme and Host. */
  client: AssertedClient,
});
export type Assertion = z.infer<typeof Assertion>;
export type TenantAssertion = z.infer<typeof TenantAssertion>;

/**
 * A host-to-host call (docs/cluster.md, "Host-to-host calls"): one process of the deployment asking another for
 * something of its host (a layer), for no tenant and no visitor. `host_id` is the calling process's host, as it
 * claims it under the deployment key (any holder of the key is a process of the deployment); it names the caller in
 * the receiver's log. No client: nobody outside the deployment is behind it. The listener hands such a request to
 * the host handlers only (listener.ts), never to the tenant API, the gateway or the preview proxy.
 */
export const HostCallAssertion = z.strictObject({
  on_behalf_of: z.strictObject({ kind: z.literal('host'), host_id: Id('host') }),
  request_id: Id('req'),
});
export type HostCallAssertion = z.infer<typeof HostCallAssertion>;

/** What a signature may carry: a forwarded caller, or a host-to-host call. */
export const SignedAssertion = z.union([Assertion, HostCallAssertion]);
export type SignedAssertion = z.infer<typeof SignedAssertion>;

/** JSON with every object's keys sorted and no whitespace: one text per value, whichever process writes it. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** The header value: base64url of the canonical JSON. */
export function encodeAssertion(a: SignedAssertion): string {
  return Buffer.from(canonicalJson(a), 'utf8').toString('base64url');
}

/** The assertion a verified header carries, or null when it is not one (only ever called after the signature held). */
export function decodeAssertion(value: string): SignedAssertion | null {
  if (value.length > MAX_ASSERTION_CHARS || !/^[A-Za-z0-9_-]+$/.test(value)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const r = SignedAssertion.safeParse(parsed);
  return r.success ? r.data : null;
}

/** What the arriving process asserts for a caller it authenticated. */
export function tenantAssertion(p: OrgPrincipal): TenantAssertion {
  return {
    kind: 'tenant',
    principal_kind: p.kind,
    user_id: p.user_id,
    auth_session_id: p.auth_session_id,
    api_key_id: p.api_key_id,
    org_id: p.org_id,
    role: p.role,
    scopes: p.scopes,
    permissions: [...p.permissions].sort(),
    via_cookie: p.via_cookie,
  };
}

/** The principal the receiving process acts for: rebuilt from the verified assertion only. */
export function principalOf(a: TenantAssertion): OrgPrincipal {
  return {
    kind: a.principal_kind,
    user_id: a.user_id,
    auth_session_id: a.auth_session_id,
    api_key_id: a.api_key_id,
    org_id: a.org_id,
    role: a.role,
    scopes: a.scopes,
    permissions: new Set(a.permissions),
    via_cookie: a.via_cookie,
  };
}

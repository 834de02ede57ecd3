/**
 * The principal assertion: who a forwarded request acts for, as the process that authenticated the caller saw it.
 * The forwarding process strips every tenant credential (headers.ts), so this signed header is all the receiving
 * process knows of the caller: it rebuilds the principal from it and from nothing else. Canonical JSON (keys
 * sorted, no spaces), carried as base64url, covered by the signature (signature.ts).
 *
 * Who a request acts for (`on_behalf_of`) is the same for every request of one caller; only the request id and the
 * client differ. So each end does that part's work once per caller: the sender encodes a principal's part once
 * (kept beside the principal while it is remembered, services/key-cache.ts), and the receiver checks a part's text
 * against the schema once and keeps what it checked, keyed by that text (`decodeAssertion`).
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

/** The forms of a client's address and Host, as plain checks too: the sender tests a caller's before asserting it. */
export const ASSERTED_HOST = /^[A-Za-z0-9.:[\]_-]{1,255}$/;
export const MAX_ASSERTED_IP = 64;
export const assertableIp = (ip: string): boolean => ip.length >= 1 && ip.length <= MAX_ASSERTED_IP;

/** The caller as the arriving process saw it (caller.ts builds it). */
export const AssertedClient = z.strictObject({
  ip: z.string().min(1).max(MAX_ASSERTED_IP),
  proto: z.enum(['http', 'https']),
  host: z.string().regex(ASSERTED_HOST),
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

/** A host-to-host call's `on_behalf_of` (below). */
const HostOnBehalfOf = z.strictObject({ kind: z.literal('host'), host_id: Id('host') });

/**
 * A host-to-host call (docs/cluster.md, "Host-to-host calls"): one process of the deployment asking another for
 * something of its host (a layer), for no tenant and no visitor. `host_id` is the calling process's host, as it
 * claims it under the deployment key (any holder of the key is a process of the deployment); it names the caller in
 * the receiver's log. No client: nobody outside the deployment is behind it. The listener hands such a request to
 * the host handlers only (listener.ts), never to the tenant API, the gateway or the preview proxy.
 */
export const HostCallAssertion = z.strictObject({
  on_behalf_of: HostOnBehalfOf,
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

type OnBehalfOf = SignedAssertion['on_behalf_of'];

/** Every `on_behalf_of` a signed assertion may carry, told apart by `kind`. */
const OnBehalfOf = z.discriminatedUnion('kind', [TenantAssertion, PreviewAssertion, HostOnBehalfOf]);

/** The rest of an assertion, `on_behalf_of` checked on its own (`decodeAssertion`); a client for everyone but a host. */
const AssertionRest = z.strictObject({ on_behalf_of: z.unknown(), request_id: Id('req'), client: AssertedClient.optional() });

/** The canonical JSON of `on_behalf_of` parts that are immutable (frozen by `tenantAssertion`), by identity. */
const encodedParts = new WeakMap<object, string>();

/**
 * The header value: base64url of the canonical JSON (keys in order: client, on_behalf_of, request_id), with the
 * `on_behalf_of` part's text taken from `encodedParts` when it is there.
 */
export function encodeAssertion(a: SignedAssertion): string {
  const part = encodedParts.get(a.on_behalf_of) ?? canonicalJson(a.on_behalf_of);
  const client = 'client' in a ? `"client":${canonicalJson(a.client)},` : '';
  return Buffer.from(`{${client}"on_behalf_of":${part},"request_id":${JSON.stringify(a.request_id)}}`, 'utf8').toString('base64url');
}

/** `on_behalf_of` parts checked, by their JSON text: at most this many, all dropped when full. */
const MAX_CHECKED_PARTS = 1024;
const checkedParts = new Map<string, OnBehalfOf>();

/**
 * An `on_behalf_of` as received, checked against the schema once per text. The text is the parsed value written
 * back (`JSON.stringify` of what `JSON.parse` made: one text per value, whatever the sender's spacing or repeats), so a
 * text found is a value already checked; what is kept is frozen, and never handed out to be changed.
 */
function checkedPart(v: unknown): OnBehalfOf | null {
  const text = JSON.stringify(v);
  const known = checkedParts.get(text);
  if (known) return known;
  const r = OnBehalfOf.safeParse(v);
  if (!r.success) return null;
  const part = r.data;
  if (part.kind === 'tenant') {
    Object.freeze(part.permissions);
    if (part.scopes) Object.freeze(part.scopes);
  }
  Object.freeze(part);
  if (checkedParts.size >= MAX_CHECKED_PARTS) checkedParts.clear();
  checkedParts.set(text, part);
  return part;
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
  const rest = AssertionRest.safeParse(parsed);
  if (!rest.success) return null;
  const { request_id, client } = rest.data;
  const on_behalf_of = checkedPart(rest.data.on_behalf_of);
  if (!on_behalf_of) return null;
  // A host call is for nobody outside the deployment, so it has no client; everyone else has one.
  if (on_behalf_of.kind === 'host') return client === undefined ? { on_behalf_of, request_id } : null;
  return client === undefined ? null : { on_behalf_of, request_id, client };
}

/** What each remembered principal asserts (its part encoded once, `encodedParts`). */
const asserted = new WeakMap<OrgPrincipal, TenantAssertion>();

/**
 * What the arriving process asserts for a caller it authenticated: made once per principal object (a remembered
 * key's principal is one object while it is remembered), frozen, its canonical JSON kept for `encodeAssertion`.
 */
export function tenantAssertion(p: OrgPrincipal): TenantAssertion {
  const known = asserted.get(p);
  if (known) return known;
  const a: TenantAssertion = {
    kind: 'tenant',
    principal_kind: p.kind,
    user_id: p.user_id,
    auth_session_id: p.auth_session_id,
    api_key_id: p.api_key_id,
    org_id: p.org_id,
    role: p.role,
    scopes: p.scopes && [...p.scopes],
    permissions: [...p.permissions].sort(),
    via_cookie: p.via_cookie,
  };
  Object.freeze(a.permissions);
  if (a.scopes) Object.freeze(a.scopes);
  Object.freeze(a);
  encodedParts.set(a, canonicalJson(a));
  asserted.set(p, a);
  return a;
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
    scopes: a.scopes && [...a.scopes],
    permissions: new Set(a.permissions),
    via_cookie: a.via_cookie,
  };
}

/**
 * Signed forwarded requests (docs/cluster.md, "What is signed"). The forwarding process signs, with the
 * deployment key (HMAC-SHA256), one canonical text of: the method, the path and query as sent, a timestamp, a
 * nonce, the sender's and the target's process ids, and the principal assertion. The receiving process checks
 * them in the order of `CHECKS` below and then the nonce; the first that fails is the refusal's reason (logged,
 * never answered: every refusal is the same 401). The body is not signed: it streams (docs/cluster.md says why).
 */
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { decodeAssertion, encodeAssertion, MAX_ASSERTION_CHARS, type SignedAssertion } from './assertion.js';
import type { DeploymentKey } from './key.js';
import type { ReplayCache } from './replay.js';

export const FORWARD_HEADERS = {
  sender: 'x-computer-forward-sender',
  target: 'x-computer-forward-target',
  timestamp: 'x-computer-forward-timestamp',
  nonce: 'x-computer-forward-nonce',
  assertion: 'x-computer-forward-assertion',
  signature: 'x-computer-forward-signature',
} as const;
/** Every header of the channel's own starts so; a caller's are dropped before forwarding, ours after verifying. */
export const FORWARD_HEADER_PREFIX = 'x-computer-forward-';

/** A request's timestamp may be this far from the receiver's clock, either way. */
export const SIGNATURE_WINDOW_MS = 30_000;

const SCHEME = 'computer-forward-v1';
const PROCESS_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * The channel's headers as received: each exactly once (a repeated one arrives as a list, or joined) and well formed.
 * Plain patterns, not a schema: this runs on every forwarded request before anything else, and is all a schema would
 * check here.
 */
const HEADER_FORMS: Readonly<Record<(typeof FORWARD_HEADERS)[keyof typeof FORWARD_HEADERS], RegExp>> = {
  [FORWARD_HEADERS.sender]: PROCESS_ID,
  [FORWARD_HEADERS.target]: PROCESS_ID,
  [FORWARD_HEADERS.timestamp]: /^\d{1,15}$/,
  [FORWARD_HEADERS.nonce]: /^[A-Za-z0-9_-]{22,64}$/,
  [FORWARD_HEADERS.assertion]: new RegExp(`^[A-Za-z0-9_-]{1,${MAX_ASSERTION_CHARS}}$`),
  [FORWARD_HEADERS.signature]: /^[A-Za-z0-9_-]{43}$/,
};

/** A channel header's value if it came once and well formed, else null. */
function channelHeader(headers: IncomingHttpHeaders, name: keyof typeof HEADER_FORMS): string | null {
  const v = headers[name];
  return typeof v === 'string' && HEADER_FORMS[name].test(v) ? v : null;
}

/** What one signature covers. */
export interface SignedFields {
  method: string;
  /** The request target as sent: path and query, never re-encoded. */
  path: string;
  /** Epoch milliseconds. */
  timestamp: number;
  nonce: string;
  sender: string;
  target: string;
  /** The assertion's header value (base64url canonical JSON). */
  assertion: string;
}

/**
 * A nonce no other request of any process carries: a random prefix drawn once per process (128 bits) and a counter.
 * Unpredictability is not needed (the MAC is what cannot be forged), uniqueness is; and it spares each request a draw
 * from the system's random source.
 */
const NONCE_PREFIX = randomBytes(16).toString('base64url');
let nonces = 0;
const nextNonce = (): string => `${NONCE_PREFIX}${(nonces++).toString(36)}`;

/** The one text signed: each field on its own line (none can hold a line break: each is checked first). */
export function canonicalRequest(f: SignedFields): string {
  return [SCHEME, f.method, f.path, String(f.timestamp), f.nonce, f.sender, f.target, f.assertion].join('\n');
}

/** The channel's headers for one request from `sender` to `target`. */
export function signRequest(
  key: DeploymentKey,
  r: { method: string; path: string; sender: string; target: string; assertion: SignedAssertion; now: number },
): Record<string, string> {
  const f: SignedFields = {
    method: r.method,
    path: r.path,
    timestamp: r.now,
    nonce: nextNonce(),
    sender: r.sender,
    target: r.target,
    assertion: encodeAssertion(r.assertion),
  };
  return {
    [FORWARD_HEADERS.sender]: f.sender,
    [FORWARD_HEADERS.target]: f.target,
    [FORWARD_HEADERS.timestamp]: String(f.timestamp),
    [FORWARD_HEADERS.nonce]: f.nonce,
    [FORWARD_HEADERS.assertion]: f.assertion,
    [FORWARD_HEADERS.signature]: key.mac(canonicalRequest(f)).toString('base64url'),
  };
}

/** Why a request was not served (the operator's log; the caller only ever sees 401). */
export type ForwardRefusal =
  | 'missing_header'
  | 'malformed_header'
  | 'malformed_request'
  | 'stale_timestamp'
  | 'wrong_target'
  | 'bad_signature'
  | 'replayed_nonce'
  | 'nonce_cache_full'
  | 'malformed_assertion';

export type ForwardVerdict = { ok: true; sender: string; assertion: SignedAssertion } | { ok: false; reason: ForwardRefusal };

interface Checked {
  fields: SignedFields;
  signature: Buffer;
  self: string;
  now: number;
  key: DeploymentKey;
}

/** The checks before the nonce, in order: the first failing one names the refusal. */
const CHECKS: ReadonlyArray<readonly [ForwardRefusal, (c: Checked) => boolean]> = [
  ['malformed_request', (c) => /^[A-Z]{1,16}$/.test(c.fields.method) && /^\/[\x21-\x7e]{0,8191}$/.test(c.fields.path)],
  ['stale_timestamp', (c) => Math.abs(c.now - c.fields.timestamp) <= SIGNATURE_WINDOW_MS],
  ['wrong_target', (c) => c.fields.target === c.self],
  ['bad_signature', (c) => c.key.verifies(canonicalRequest(c.fields), c.signature)],
];

/**
 * Whether a request received by process `self` was signed by a process of this deployment for it, now, once;
 * and for whom it acts. A nonce is remembered only once everything else held.
 */
export function verifyRequest(
  key: DeploymentKey,
  req: { method?: string; url?: string; headers: IncomingHttpHeaders },
  o: { self: string; now: number; replay: ReplayCache },
): ForwardVerdict {
  if (Object.values(FORWARD_HEADERS).some((name) => req.headers[name] === undefined)) return { ok: false, reason: 'missing_header' };
  const timestamp = channelHeader(req.headers, FORWARD_HEADERS.timestamp);
  const nonce = channelHeader(req.headers, FORWARD_HEADERS.nonce);
  const sender = channelHeader(req.headers, FORWARD_HEADERS.sender);
  const target = channelHeader(req.headers, FORWARD_HEADERS.target);
  const assertion = channelHeader(req.headers, FORWARD_HEADERS.assertion);
  const signature = channelHeader(req.headers, FORWARD_HEADERS.signature);
  if (!timestamp || !nonce || !sender || !target || !assertion || !signature) return { ok: false, reason: 'malformed_header' };
  const c: Checked = {
    fields: { method: req.method ?? '', path: req.url ?? '', timestamp: Number(timestamp), nonce, sender, target, assertion },
    signature: Buffer.from(signature, 'base64url'),
    self: o.self,
    now: o.now,
    key,
  };
  for (const [reason, holds] of CHECKS) if (!holds(c)) return { ok: false, reason };
  const seen = o.replay.admit(c.fields.nonce, o.now);
  if (seen !== 'fresh') return { ok: false, reason: seen === 'replayed' ? 'replayed_nonce' : 'nonce_cache_full' };
  const decoded = decodeAssertion(c.fields.assertion);
  return decoded ? { ok: true, sender: c.fields.sender, assertion: decoded } : { ok: false, reason: 'malformed_assertion' };
}

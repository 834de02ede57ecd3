/**
 * What crosses the internal channel in headers (pure; docs/cluster.md, "What is stripped"). Towards the owning
 * process: the caller's headers minus hop-by-hop ones, minus every credential this service issued (the API key
 * or session in Authorization, the session and preview cookies), minus anything shaped like the channel's own
 * headers or a proxy's (the caller's address travels in the signed assertion). The receiving process applies the
 * same credential rule again, so a handler behind it can only act for the asserted principal. Back towards the
 * caller: the owner's headers minus hop-by-hop ones, otherwise unchanged.
 */
import { HOP_BY_HOP, namedByConnection } from '../../domain/hop-by-hop.js';
import { withoutOurCookies } from '../../domain/preview-headers.js';
import { FORWARD_HEADER_PREFIX } from './signature.js';

/**
 * Whether the caller's Authorization header crosses: `drop` for /v1 and the gateway (it holds the API key) and for
 * a preview whose own secret it was; `keep` only for a preview visitor's header that is the guest app's own.
 */
export type AuthorizationRule = 'drop' | 'keep';

export interface CredentialRule {
  authorization: AuthorizationRule;
}

function isProxyHeader(lower: string): boolean {
  return lower.startsWith(FORWARD_HEADER_PREFIX) || lower.startsWith('x-forwarded-') || lower === 'forwarded';
}

/**
 * The caller's headers without credentials of ours or the channel's own, as a flat [name, value, …] list (casing
 * and repeats kept), and without Host (each end sets it from the assertion).
 */
export function withoutCredentials(raw: readonly string[], rule: CredentialRule): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    const value = raw[i + 1]!;
    if (lower === 'host' || isProxyHeader(lower)) continue;
    if (lower === 'authorization' && rule.authorization === 'drop') continue;
    if (lower === 'cookie') {
      const rest = withoutOurCookies(value);
      if (rest) out.push(name, rest);
      continue;
    }
    out.push(name, value);
  }
  return out;
}

/** Request headers for the owning process (before the channel's signed ones and Host are added). */
export function requestHeadersForOwner(raw: readonly string[], o: CredentialRule & { upgrade: boolean }): string[] {
  const named = namedByConnection(raw);
  const chunked = raw.some((v, i) => i % 2 === 0 && v.toLowerCase() === 'transfer-encoding');
  const out: string[] = [];
  const kept = withoutCredentials(raw, o);
  for (let i = 0; i + 1 < kept.length; i += 2) {
    const lower = kept[i]!.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue;
    // A body sent chunked is re-sent chunked (below); a length beside it would frame it twice.
    if (lower === 'content-length' && chunked) continue;
    out.push(kept[i]!, kept[i + 1]!);
  }
  if (chunked) out.push('Transfer-Encoding', 'chunked');
  if (o.upgrade) {
    const up = raw.findIndex((v, i) => i % 2 === 0 && v.toLowerCase() === 'upgrade');
    out.push('Connection', 'Upgrade');
    if (up >= 0) out.push('Upgrade', raw[up + 1]!);
  }
  return out;
}

/**
 * Set by a process on its refusal of a forwarded machine request it does not serve (it no longer drives the machine's
 * host): the sender may route again (forward-request.ts `settle`). Never passed on to the caller.
 */
export const OWNER_REFUSED_HEADER = 'x-computer-owner-refused';

/** The owner's response headers for the caller as a flat list; `upgrade` keeps a 101's Connection and Upgrade. */
export function responseHeadersForCaller(raw: readonly string[], upgrade = false): string[] {
  const named = namedByConnection(raw);
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    const passes = upgrade && (lower === 'connection' || lower === 'upgrade');
    if (!passes && (HOP_BY_HOP.has(lower) || named.has(lower) || lower === OWNER_REFUSED_HEADER)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

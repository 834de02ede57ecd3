/**
 * What crosses the preview proxy in headers (pure). Towards the guest: the client's headers minus
 * hop-by-hop ones and minus every credential of ours (the preview's cookie and bearer, the API's
 * session cookie). Towards the client: the guest's headers minus hop-by-hop ones, with cookie `Domain`
 * attributes removed so a guest can only ever set cookies on its own preview hostname.
 */
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../../../shared/schemas/auth.js';
import { PREVIEW_COOKIE } from '../../../shared/schemas/ports.js';
import { HOP_BY_HOP, namedByConnection } from './hop-by-hop.js';

/** Cookies that are ours, never the guest's. */
const OUR_COOKIES = new Set([PREVIEW_COOKIE, SESSION_COOKIE, SECURE_SESSION_COOKIE]);

/** The Cookie header without our cookies; null when nothing is left. */
export function withoutOurCookies(header: string): string | null {
  const kept = header
    .split(';')
    .map((p) => p.trim())
    .filter((p) => p && !OUR_COOKIES.has(p.slice(0, p.includes('=') ? p.indexOf('=') : p.length).trim()));
  return kept.length ? kept.join('; ') : null;
}

/** `Bearer <token>` → token, else null. */
export function bearerOf(authorization: string | undefined): string | null {
  const m = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return m ? m[1]! : null;
}

export interface ForwardOptions {
  /** The Authorization header was the preview's own credential: drop it. */
  dropAuthorization: boolean;
  /** Keep `Connection: upgrade` and `Upgrade` (a WebSocket handshake). */
  upgrade: boolean;
  /** Values for X-Forwarded-For/-Proto/-Host. */
  forwarded: { for: string; proto: string; host: string };
}

/**
 * Request headers for the guest, as a flat [name, value, …] list (Node's rawHeaders order, so duplicate
 * headers and the client's casing survive).
 */
export function requestHeadersForGuest(raw: readonly string[], o: ForwardOptions): string[] {
  const named = namedByConnection(raw);
  const chunked = raw.some((v, i) => i % 2 === 0 && v.toLowerCase() === 'transfer-encoding');
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    const value = raw[i + 1]!;
    if (HOP_BY_HOP.has(lower) || (named.has(lower) && !(o.upgrade && lower === 'upgrade'))) continue;
    if (lower.startsWith('x-forwarded-') || lower === 'forwarded') continue;
    if (lower === 'authorization' && o.dropAuthorization) continue;
    // A body sent chunked is re-sent chunked (below); a length beside it would frame it twice.
    if (lower === 'content-length' && chunked) continue;
    if (lower === 'cookie') {
      const rest = withoutOurCookies(value);
      if (rest) out.push(name, rest);
      continue;
    }
    out.push(name, value);
  }
  // Node re-frames the body it parsed; a chunked request stays chunked whatever its method.
  if (chunked) out.push('Transfer-Encoding', 'chunked');
  if (o.upgrade) {
    const up = raw.findIndex((v, i) => i % 2 === 0 && v.toLowerCase() === 'upgrade');
    out.push('Connection', 'Upgrade');
    if (up >= 0) out.push('Upgrade', raw[up + 1]!);
  } else {
    // One request per guest connection: the proxy opens a fresh stream for each.
    out.push('Connection', 'close');
  }
  out.push('X-Forwarded-For', o.forwarded.for, 'X-Forwarded-Proto', o.forwarded.proto, 'X-Forwarded-Host', o.forwarded.host);
  return out;
}

/** A Set-Cookie value with any Domain attribute removed (the cookie becomes host-only). */
export function hostOnlyCookie(setCookie: string): string {
  return setCookie
    .split(';')
    .filter((p, i) => i === 0 || !/^\s*domain\s*=/i.test(p))
    .join(';');
}

/** Response headers for the client as a flat list; `upgrade` keeps the 101's Connection/Upgrade. */
export function responseHeadersFromGuest(raw: readonly string[], upgrade = false): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) && !(upgrade && (lower === 'connection' || lower === 'upgrade'))) continue;
    // The guest may not replace (or clear) the browser credential of its own preview.
    if (lower === 'set-cookie' && raw[i + 1]!.split('=')[0]!.trim() === PREVIEW_COOKIE) continue;
    out.push(name, lower === 'set-cookie' ? hostOnlyCookie(raw[i + 1]!) : raw[i + 1]!);
  }
  return out;
}

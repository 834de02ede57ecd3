/**
 * The session cookie. HttpOnly (no script may read it), SameSite=Lax (not sent on cross-site
 * subrequests), host-only (no Domain attribute). Under an https public base URL it is
 * `__Host-computer_session` and Secure: a browser takes a `__Host-` cookie only host-only with `Path=/`
 * from a secure origin, so a page on a sibling subdomain cannot toss one at the API (docs/security.md,
 * "Cookie tossing"). Plain http (loopback development) keeps `computer_session`, because a `__Host-`
 * cookie needs Secure; there a request carrying two session cookies is refused instead of guessing.
 */
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../../../shared/schemas/auth.js';

/** Browser session lifetime: absolute, from login. */
export const SESSION_TTL_MS = 14 * 24 * 60 * 60 * 1000;

export function sessionCookieName(secure: boolean): string {
  return secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

export function sessionCookie(token: string, secure: boolean): string {
  return `${sessionCookieName(secure)}=${token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${SESSION_TTL_MS / 1000}${secure ? '; Secure' : ''}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return `${sessionCookieName(secure)}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${secure ? '; Secure' : ''}`;
}

/** What a request's Cookie header says about the session: none, one token, or more than one cookie of that name. */
export type SessionCookieRead = { kind: 'none' } | { kind: 'one'; token: string } | { kind: 'many' };

/**
 * The session token of a Cookie header. More than one cookie of the session's name is `many`: a
 * browser sends a cookie tossed from a sibling domain (`Domain=` the parent, a longer `Path`) beside, and
 * before, the API's own, so taking either would let another site choose whose session this is.
 */
export function readSessionCookie(header: string | undefined, secure: boolean): SessionCookieRead {
  const values = readCookies(header, sessionCookieName(secure));
  if (values.length > 1) return { kind: 'many' };
  return values[0] ? { kind: 'one', token: values[0] } : { kind: 'none' };
}

/** Every value a Cookie header carries under `name`, in order (a browser may send several). Empty values are left out. */
export function readCookies(header: string | undefined, name: string): string[] {
  if (!header) return [];
  const out: string[] = [];
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0 || part.slice(0, i).trim() !== name) continue;
    const v = part.slice(i + 1).trim();
    if (v) out.push(v);
  }
  return out;
}

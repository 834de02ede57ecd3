/**
 * The session cookie. HttpOnly (no script may read it), SameSite=Lax (not sent on cross-site
 * subrequests), Secure whenever the public base URL is https, host-only (no Domain attribute).
 */
import { SESSION_COOKIE } from '../../../shared/schemas/auth.js';

/** Browser session lifetime: absolute, from login. */
export const SESSION_TTL_MS = 14 * 24 * 60 * 60 * 1000;

export function sessionCookie(token: string, secure: boolean): string {
  return `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${SESSION_TTL_MS / 1000}${secure ? '; Secure' : ''}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${secure ? '; Secure' : ''}`;
}

export function readSessionCookie(header: string | undefined): string | null {
  return readCookie(header, SESSION_COOKIE);
}

/** One cookie's value from a Cookie header, or null. */
export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    if (part.slice(0, i).trim() === name) return part.slice(i + 1).trim() || null;
  }
  return null;
}

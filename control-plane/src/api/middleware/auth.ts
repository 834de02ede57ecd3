import type { MiddlewareHandler } from 'hono';
import type { Permission } from '../../../../shared/schemas/org.js';
import { readSessionCookie } from '../../auth/cookies.js';
import { isRecognisedOrigin } from '../../config.js';
import { actsInOrg, type CpEnv, type Principal } from '../../context.js';
import type { Services } from '../../services/index.js';
import { ERRORS } from '../../errors.js';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export type AuthMode =
  /** API key or session cookie. */
  | 'any'
  /** Session cookie only: browser-session routes (logout, sessions, switching, accepting invitations). */
  | 'session';

/**
 * Security gate: establishes the principal or answers 401. An Authorization header, if present, must
 * be a valid key (a bad key never falls back to the cookie). A cookie-authenticated write must come
 * from a recognised Origin, which is what stops another site from driving a signed-in browser.
 */
export function authenticate(s: Services, mode: AuthMode = 'any'): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const forwarded = c.env?.forwarded;
    if (forwarded) {
      // Arrived over the internal channel: the arriving process authenticated the caller (key or cookie, its
      // Origin rule, the organization); the signed assertion is the principal, and no credential crossed.
      if (forwarded.on_behalf_of.kind !== 'tenant') throw ERRORS.forwardNotSigned();
      const fp = forwarded.on_behalf_of.principal;
      if (mode === 'session' && fp.kind !== 'user') throw ERRORS.needsBrowserSession();
      c.set('principal', fp);
      await next();
      return;
    }
    const authz = c.req.header('authorization');
    let p: Principal | null;
    if (authz !== undefined) {
      const m = /^Bearer (\S+)$/.exec(authz);
      p = m ? await s.identity.principalFromApiKey(m[1]!) : null;
      if (!p) throw ERRORS.badApiKey();
    } else {
      const read = readSessionCookie(c.req.header('cookie'), s.config.secureCookies);
      if (read.kind === 'many') throw ERRORS.twoSessionCookies();
      p = read.kind === 'one' ? await s.identity.principalFromCookie(read.token) : null;
      if (!p) throw ERRORS.signInOrSendKey();
    }
    if (p.via_cookie && WRITE_METHODS.has(c.req.method) && !isRecognisedOrigin(s.config, c.req.header('origin'))) {
      throw ERRORS.cookieWriteNeedsOrigin();
    }
    if (mode === 'session' && p.kind !== 'user') {
      throw ERRORS.needsBrowserSession();
    }
    c.set('principal', p);
    await next();
  };
}

/** Reads are gated by membership: the principal must be acting in an organization. */
export function requireOrg(): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const p = c.get('principal');
    if (!p || !actsInOrg(p)) throw ERRORS.noOrganization();
    c.set('orgPrincipal', p);
    await next();
  };
}

/** The guard later route files use: `requirePermission('machines:create')`. */
export function requirePermission(perm: Permission): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const p = c.get('principal');
    if (!p?.org_id || !p.permissions.has(perm)) throw ERRORS.needsPermission(perm);
    await next();
  };
}

/**
 * Routes that take no credential (signup, login) still refuse a browser request from a foreign
 * Origin, so another site cannot sign a visitor into an attacker's account. Non-browser clients send
 * no Origin and are unaffected.
 */
export function refuseForeignOrigin(s: Services): MiddlewareHandler<CpEnv> {
  return async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined && WRITE_METHODS.has(c.req.method) && !isRecognisedOrigin(s.config, origin)) {
      throw ERRORS.foreignOrigin();
    }
    await next();
  };
}

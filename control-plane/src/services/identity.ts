/**
 * Accounts and credentials: signup, login, browser sessions, API-key resolution, and the principal
 * every authenticated request carries.
 */
import { newId } from '../../../shared/ids.js';
import type { LoginRequest, SignupRequest } from '../../../shared/schemas/auth.js';
import type { PageQuery } from '../../../shared/schemas/pagination.js';
import { SESSION_TTL_MS } from '../auth/cookies.js';
import { DEFAULT_SCRYPT_COST, hashPassword, makeDummyHash, verifyPassword, type ScryptCost } from '../auth/passwords.js';
import { API_KEY_RE, OPAQUE_TOKEN_RE, newOpaqueToken, sameDigest, sha256Hex } from '../auth/tokens.js';
import { keyPermissions, rolePermissions } from '../domain/rbac.js';
import type { OrgPrincipal, Principal } from '../context.js';
import { pageOf } from '../store/pagination.js';
import { parseScopes } from '../store/repos/access.js';
import type { AuthSessionRow } from '../store/repos/identity.js';
import type { Store } from '../store/store.js';
import type { RateLimiter } from './rate-limiter.js';
import { ERRORS } from '../errors.js';
import { conflictOnUnique } from '../store/unique-violation.js';

/** last_used_at of keys and sessions is written at most once a minute: every request is not worth an fsync. */
const TOUCH_INTERVAL_MS = 60_000;

export interface IdentityDeps {
  store: Store;
  now: () => Date;
  limiter: RateLimiter;
  passwordCost?: ScryptCost;
  /** Creates the organization's billing account inside the signup transaction. */
  openBillingAccount: (orgId: string) => Promise<void>;
}

export function createIdentityService(d: IdentityDeps) {
  const { store, now } = d;
  const cost = d.passwordCost ?? DEFAULT_SCRYPT_COST;
  let dummy: Promise<string> | null = null;
  const iso = () => now().toISOString();

  async function newSession(userId: string, activeOrgId: string | null): Promise<{ token: string; session: AuthSessionRow }> {
    const { token, hash } = newOpaqueToken();
    const at = now();
    const session: AuthSessionRow = {
      id: newId('auth_session'),
      user_id: userId,
      token_hash: hash,
      active_org_id: activeOrgId,
      created_at: at.toISOString(),
      last_used_at: at.toISOString(),
      expires_at: new Date(at.getTime() + SESSION_TTL_MS).toISOString(),
      revoked_at: null,
    };
    await store.identity.insertSession(session);
    return { token, session };
  }

  /** The organization a session acts in: the chosen one while still a member, else the first membership. */
  async function activeMembership(userId: string, preferred: string | null) {
    if (preferred) {
      const m = await store.identity.membership(preferred, userId);
      if (m) return m;
    }
    return (await store.identity.membershipsOfUser(userId))[0] ?? null;
  }

  return {
    async signup(req: SignupRequest, ip: string) {
      await d.limiter.admit('signup_ip', ip);
      const passwordHash = await hashPassword(req.password, cost);
      const at = iso();
      const userId = newId('user');
      const orgId = newId('organization');
      const display = req.name ?? req.email.split('@')[0]!;
      return store.db.tx(async () => {
        if (await store.identity.userByEmail(req.email)) throw ERRORS.emailTaken();
        // Another process may insert the same address between the check and this insert (PostgreSQL): the same 409.
        await conflictOnUnique(store.identity.insertUser({ id: userId, email: req.email, name: req.name ?? null, password_hash: passwordHash, personal_org_id: null, created_at: at }), ERRORS.emailTaken);
        await store.identity.insertOrg({ id: orgId, name: `${display}'s organization`.slice(0, 120), personal: 1, created_at: at });
        await store.identity.setPersonalOrg(userId, orgId);
        await store.identity.insertMembership({ id: newId('membership'), org_id: orgId, user_id: userId, role: 'owner', created_at: at });
        await d.openBillingAccount(orgId);
        return { userId, orgId, ...(await newSession(userId, orgId)) };
      });
    },

    /**
     * Security gate: failed logins slow down the (address, client IP) pair exponentially and cap each IP,
     * both checked before the password (so a guesser learns nothing while waiting); an attacker failing
     * from elsewhere never delays the user's own IP (domain/rate-limits.ts).
     */
    async login(req: LoginRequest, ip: string) {
      const pair = `${req.email}\n${ip}`;
      await d.limiter.assertAllowed('login_failure_ip', ip);
      await d.limiter.assertAllowed('login_failure_email_ip', pair);
      const user = await store.identity.userByEmail(req.email);
      let ok = false;
      if (user) ok = await verifyPassword(req.password, user.password_hash);
      else await verifyPassword(req.password, await (dummy ??= makeDummyHash(cost)));
      if (!user || !ok) {
        await d.limiter.hit('login_failure_ip', ip);
        await d.limiter.hit('login_failure_email_ip', pair);
        throw ERRORS.wrongCredentials();
      }
      // Only the pair's counter: clearing the IP's would let a guesser reset it by logging in to an account of its own.
      await d.limiter.clear('login_failure_email_ip', pair);
      const m = await activeMembership(user.id, user.personal_org_id);
      return { userId: user.id, ...(await newSession(user.id, m?.org_id ?? null)) };
    },

    async logout(sessionId: string): Promise<void> {
      await store.identity.revokeSession(sessionId, iso());
    },

    /** Resolves a session cookie. Unknown, expired or revoked → null (the caller answers 401). */
    async principalFromCookie(token: string): Promise<Principal | null> {
      if (!OPAQUE_TOKEN_RE.test(token)) return null;
      const hash = sha256Hex(token);
      const s = await store.identity.sessionByTokenHash(hash);
      if (!s || !sameDigest(s.token_hash, hash) || s.revoked_at || s.expires_at <= iso()) return null;
      if (now().getTime() - Date.parse(s.last_used_at) >= TOUCH_INTERVAL_MS) await store.identity.touchSession(s.id, iso());
      const m = await activeMembership(s.user_id, s.active_org_id);
      return {
        kind: 'user',
        user_id: s.user_id,
        auth_session_id: s.id,
        api_key_id: null,
        org_id: m?.org_id ?? null,
        role: m?.role ?? null,
        scopes: null,
        permissions: m ? rolePermissions(m.role) : new Set(),
        via_cookie: true,
      };
    },

    /**
     * Resolves an API key. The key's permissions are recomputed from its creator's membership on
     * every request; a key whose creator has left the organization authenticates nobody. A key always
   * acts in its organization, so what it resolves to is org-scoped.
     */
    async principalFromApiKey(secret: string): Promise<OrgPrincipal | null> {
      if (!API_KEY_RE.test(secret)) return null;
      const hash = sha256Hex(secret);
      // The key and its creator's membership in one read: a key whose creator left comes back as none.
      const k = await store.access.apiKeyWithCreatorRole(hash);
      if (!k || !sameDigest(k.secret_hash, hash)) return null;
      const at = now();
      if (!k.last_used_at || at.getTime() - Date.parse(k.last_used_at) >= TOUCH_INTERVAL_MS) await store.access.touchApiKey(k.id, at.toISOString());
      const scopes = parseScopes(k);
      return {
        kind: 'api_key',
        user_id: k.created_by,
        auth_session_id: null,
        api_key_id: k.id,
        org_id: k.org_id,
        role: k.creator_role,
        scopes,
        permissions: keyPermissions(scopes, k.creator_role),
        via_cookie: false,
      };
    },

    listSessions(userId: string, currentId: string | null, q: PageQuery) {
      return pageOf(q, (after, limit) => store.identity.liveSessionsPage(userId, iso(), after, limit), (s) => ({
        id: s.id,
        created_at: s.created_at,
        last_used_at: s.last_used_at,
        expires_at: s.expires_at,
        current: s.id === currentId,
      }));
    },

    async revokeSession(userId: string, sessionId: string): Promise<void> {
      const s = await store.identity.sessionOfUser(userId, sessionId);
      if (!s || s.revoked_at || s.expires_at <= iso()) throw ERRORS.noSuchSession();
      await store.identity.revokeSession(s.id, iso());
    },

    async switchOrganization(p: Principal, orgId: string) {
      const m = await store.identity.membership(orgId, p.user_id);
      // Not a member looks exactly like no such organization.
      if (!m) throw ERRORS.noSuchOrganization();
      await store.identity.setActiveOrg(p.auth_session_id!, orgId);
      return m;
    },

    async me(p: Principal) {
      const user = (await store.identity.userById(p.user_id))!;
      const org = p.org_id ? (await store.identity.orgById(p.org_id))! : null;
      return {
        user: { id: user.id, email: user.email, name: user.name, created_at: user.created_at },
        principal: p.kind === 'user' ? { type: 'user' as const, id: user.id, auth_session_id: p.auth_session_id } : { type: 'api_key' as const, id: p.api_key_id, scopes: p.scopes },
        organization: org ? { id: org.id, name: org.name, personal: org.personal === 1, role: p.role } : null,
        // A key is bound to one organization: it must not learn which others its creator belongs to.
        organizations: p.kind === 'api_key' ? [] : (await store.identity.membershipsOfUser(user.id)).map((m) => ({ id: m.org_id, name: m.org_name, role: m.role })),
        permissions: [...p.permissions].sort(),
      };
    },
  };
}
export type IdentityService = ReturnType<typeof createIdentityService>;

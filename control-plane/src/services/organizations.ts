/**
 * Members, invitations and API keys of one organization. Every lookup is by (org_id, id): a resource
 * of another organization is `not_found`, never `permission_denied`.
 */
import { newId } from '../../../shared/ids.js';
import type { CreateApiKeyRequest, CreateInvitationRequest, Role } from '../../../shared/schemas/org.js';
import type { PageQuery } from '../../../shared/schemas/pagination.js';
import { newApiKey, newOpaqueToken, OPAQUE_TOKEN_RE, sha256Hex } from '../auth/tokens.js';
import type { OrgPrincipal, Principal } from '../context.js';
import { canAssignRole } from '../domain/rbac.js';
import { pageOf } from '../store/pagination.js';
import { parseScopes, type ApiKeyRow, type InvitationRow } from '../store/repos/access.js';
import type { MemberView } from '../store/repos/identity.js';
import type { Store } from '../store/store.js';
import type { QuotaService } from './quotas.js';
import { ERRORS } from '../errors.js';
import { conflictOnUnique } from '../store/unique-violation.js';

/** Invitations expire a week after they are sent. */
export const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

const memberView = (m: MemberView) => ({ id: m.id, user_id: m.user_id, email: m.email, name: m.name, role: m.role, created_at: m.created_at });
const invitationView = (i: InvitationRow) => ({
  id: i.id, email: i.email, role: i.role, state: i.state, created_at: i.created_at, expires_at: i.expires_at,
  accepted_at: i.accepted_at, revoked_at: i.revoked_at,
});
const keyView = (k: ApiKeyRow) => ({
  id: k.id, name: k.name, prefix: k.prefix, scopes: parseScopes(k), created_by: k.created_by, created_at: k.created_at, last_used_at: k.last_used_at,
});

/** Keys that stopped working for good: one revoked key, or every key a departed member created in the organization. */
export type KeysLost = { org_id: string; key_id: string } | { org_id: string; user_id: string };

export function createOrganizationService(d: {
  store: Store;
  now: () => Date;
  quotas: QuotaService;
  /** After a change that takes a key's power away or narrows it (a role, a membership, a key): services/key-cache.ts forgets. */
  accessChanged?: () => void;
}) {
  const { store, now } = d;
  const accessChanged = () => d.accessChanged?.();
  const iso = () => now().toISOString();

  async function member(p: OrgPrincipal, membershipId: string): Promise<MemberView> {
    const m = await store.identity.membershipInOrg(p.org_id, membershipId);
    if (!m) throw ERRORS.noSuchMember();
    return m;
  }

  function assertCanAssign(p: OrgPrincipal, from: Role | null, to: Role | null): void {
    if (!p.role || !canAssignRole(p.role, { from, to })) {
      throw ERRORS.onlyOwnerGrantsOwner();
    }
  }

  /** An organization never loses its last owner. Runs inside the writing transaction. */
  async function assertNotLastOwner(orgId: string, m: MemberView): Promise<void> {
    if (m.role === 'owner' && (await store.identity.countOwners(orgId)) <= 1) {
      throw ERRORS.lastOwner();
    }
  }

  const keysLostListeners = new Set<(lost: KeysLost) => void>();
  const keysLost = (lost: KeysLost) => {
    for (const l of keysLostListeners) l(lost);
  };

  return {
    /**
     * Called after an API key stops working for good: revoked (`key_id`), or its creator left or was
     * removed from the organization (`user_id`: every key they created there). The MCP server closes
     * the sessions those keys hold.
     */
    onKeysLost(listener: (lost: KeysLost) => void): () => void {
      keysLostListeners.add(listener);
      return () => keysLostListeners.delete(listener);
    },

    listMembers: (p: OrgPrincipal, q: PageQuery) => pageOf(q, (after, limit) => store.identity.membersPage(p.org_id, after, limit), memberView),

    async changeRole(p: OrgPrincipal, membershipId: string, role: Role) {
      const changed = await store.db.tx(async () => {
        const m = await member(p, membershipId);
        if (m.role === role) return { view: memberView(m), moved: false };
        assertCanAssign(p, m.role, role);
        await assertNotLastOwner(p.org_id, m);
        await store.identity.setRole(m.id, role);
        return { view: memberView({ ...m, role }), moved: true };
      });
      if (changed.moved) accessChanged();
      return changed.view;
    },

    /** Removing a member takes a member's power away at once, including that of keys they created. */
    async removeMember(p: OrgPrincipal, membershipId: string): Promise<void> {
      const userId = await store.db.tx(async () => {
        const m = await member(p, membershipId);
        const self = m.user_id === p.user_id && p.kind === 'user';
        if (!self) {
          if (!p.permissions.has('members:manage')) throw ERRORS.removingMemberNeedsManage();
          assertCanAssign(p, m.role, null);
        }
        await assertNotLastOwner(p.org_id, m);
        await store.identity.deleteMembership(m.id);
        return m.user_id;
      });
      accessChanged();
      keysLost({ org_id: p.org_id, user_id: userId });
    },

    async listInvitations(p: OrgPrincipal, q: PageQuery) {
      await store.access.expireInvitations(iso());
      return pageOf(q, (after, limit) => store.access.invitationsPage(p.org_id, after, limit), invitationView);
    },

    createInvitation(p: OrgPrincipal, req: CreateInvitationRequest) {
      assertCanAssign(p, null, req.role);
      const orgId = p.org_id;
      return store.db.tx(async () => {
        await store.access.expireInvitations(iso());
        const existing = await store.identity.userByEmail(req.email);
        if (existing && (await store.identity.membership(orgId, existing.id))) throw ERRORS.addressIsMember();
        if (await store.access.pendingInvitationFor(orgId, req.email)) throw ERRORS.invitationPendingForAddress();
        // Pending invitations hold seats: otherwise accepting them all could overshoot the members limit.
        await d.quotas.check(orgId, 'members', { current: async () => (await store.identity.countMembers(orgId)) + (await store.access.countPendingInvitations(orgId)) });
        const { token, hash } = newOpaqueToken();
        const at = now();
        const row: InvitationRow = {
          id: newId('invitation'), org_id: orgId, email: req.email, role: req.role, state: 'pending', token_hash: hash, invited_by: p.user_id,
          created_at: at.toISOString(), expires_at: new Date(at.getTime() + INVITATION_TTL_MS).toISOString(), accepted_at: null, accepted_by: null, revoked_at: null,
        };
        await conflictOnUnique(store.access.insertInvitation(row), ERRORS.invitationPendingForAddress);
        return { ...invitationView(row), token };
      });
    },

    revokeInvitation(p: OrgPrincipal, invitationId: string) {
      return store.db.tx(async () => {
        await store.access.expireInvitations(iso());
        const i = await store.access.invitationInOrg(p.org_id, invitationId);
        if (!i) throw ERRORS.noSuchInvitation();
        if (i.state !== 'pending') throw ERRORS.invitationNotPending(i.state);
        assertCanAssign(p, null, i.role);
        await store.access.moveInvitation(i.id, 'pending', 'revoked', { at: iso() });
        return invitationView((await store.access.invitationInOrg(i.org_id, i.id))!);
      });
    },

    /** Accepting needs the invited person: a signed-in user whose e-mail is the invitation's. */
    acceptInvitation(p: Principal, token: string) {
      return store.db.tx(async () => {
        await store.access.expireInvitations(iso());
        const i = OPAQUE_TOKEN_RE.test(token) ? await store.access.invitationByTokenHash(sha256Hex(token)) : undefined;
        if (!i) throw ERRORS.noSuchInvitation();
        const user = (await store.identity.userById(p.user_id))!;
        if (user.email !== i.email) throw ERRORS.invitationForAnotherAddress();
        if (i.state !== 'pending') throw ERRORS.invitationNotPending(i.state);
        if (await store.identity.membership(i.org_id, user.id)) throw ERRORS.alreadyMember();
        await d.quotas.check(i.org_id, 'members', { current: () => store.identity.countMembers(i.org_id) });
        if ((await store.access.moveInvitation(i.id, 'pending', 'accepted', { at: iso(), by: user.id })).changes !== 1) {
          throw ERRORS.invitationChangedConcurrently();
        }
        const membership = { id: newId('membership'), org_id: i.org_id, user_id: user.id, role: i.role, created_at: iso() };
        await conflictOnUnique(store.identity.insertMembership(membership), ERRORS.alreadyMember);
        const org = (await store.identity.orgById(i.org_id))!;
        return { membership: memberView({ ...membership, email: user.email, name: user.name }), organization: { id: org.id, name: org.name } };
      });
    },

    listApiKeys: (p: OrgPrincipal, q: PageQuery) => pageOf(q, (after, limit) => store.access.apiKeysPage(p.org_id, after, limit), keyView),

    /** A key is created: refused unless the account may create anything (spec: subscription). */
    createApiKey(p: OrgPrincipal, req: CreateApiKeyRequest) {
      return store.db.tx(async () => {
        await d.quotas.checkSubscription(p.org_id);
        const { secret, prefix, hash } = newApiKey();
        const row: ApiKeyRow = {
          id: newId('api_key'), org_id: p.org_id, created_by: p.user_id, name: req.name, prefix, secret_hash: hash,
          scopes: JSON.stringify(req.scopes), created_at: iso(), last_used_at: null, revoked_at: null,
        };
        await store.access.insertApiKey(row);
        return { ...keyView(row), secret };
      });
    },

    async revokeApiKey(p: OrgPrincipal, keyId: string): Promise<void> {
      const k = await store.db.tx(async () => {
        const k = await store.access.apiKeyInOrg(p.org_id, keyId);
        if (!k) throw ERRORS.noSuchApiKey();
        await store.access.revokeApiKey(k.id, iso());
        return k;
      });
      accessChanged();
      keysLost({ org_id: k.org_id, key_id: k.id });
    },
  };
}
export type OrganizationService = ReturnType<typeof createOrganizationService>;

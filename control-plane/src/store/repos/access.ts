/** Invitations and API keys: the two ways into an organization besides signup. */
import type { InvitationState, Role, Scope } from '../../../../shared/schemas/org.js';
import type { Db } from '../db.js';
import type { Keyset } from '../pagination.js';
import { dialect } from './dialect.js';
import { changes, type Changes } from './results.js';

export interface InvitationRow {
  id: string;
  org_id: string;
  email: string;
  role: Role;
  state: InvitationState;
  token_hash: string;
  invited_by: string;
  created_at: string;
  expires_at: string;
  accepted_at: string | null;
  accepted_by: string | null;
  revoked_at: string | null;
}

export interface ApiKeyRow {
  id: string;
  org_id: string;
  created_by: string;
  name: string;
  prefix: string;
  secret_hash: string;
  scopes: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export function parseScopes(row: ApiKeyRow): Scope[] {
  return JSON.parse(row.scopes) as Scope[];
}

export function accessRepo(db: Db) {
  const d = dialect(db.engine);
  return {
    /** Marks pending invitations past their expiry as `expired`, so every read sees the true state. */
    expireInvitations: async (now: string): Promise<Changes> =>
      changes(
        await db.q().updateTable('invitations').set({ state: 'expired' }).where('state', '=', 'pending')
          .where((eb) => eb(d.bytes('expires_at'), '<=', now)).executeTakeFirst(),
      ),
    async insertInvitation(i: InvitationRow): Promise<void> {
      await db.q().insertInto('invitations').values(i).execute();
    },
    invitationInOrg: (orgId: string, id: string): Promise<InvitationRow | undefined> =>
      db.q().selectFrom('invitations').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst(),
    invitationByTokenHash: (hash: string): Promise<InvitationRow | undefined> =>
      db.q().selectFrom('invitations').selectAll().where('token_hash', '=', hash).executeTakeFirst(),
    pendingInvitationFor: (orgId: string, email: string): Promise<InvitationRow | undefined> =>
      db.q().selectFrom('invitations').selectAll().where('org_id', '=', orgId).where('email', '=', email).where('state', '=', 'pending')
        .executeTakeFirst(),
    countPendingInvitations: async (orgId: string): Promise<number> =>
      (await db.q().selectFrom('invitations').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId)
        .where('state', '=', 'pending').executeTakeFirstOrThrow()).n,
    invitationsPage: (orgId: string, after: Keyset, limit: number): Promise<InvitationRow[]> =>
      db.q().selectFrom('invitations').selectAll().where('org_id', '=', orgId).where((eb) => d.after(eb, after))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    /** Compare-and-set on the state read, so two concurrent accepts/revokes cannot both win. */
    moveInvitation: async (id: string, from: InvitationState, to: InvitationState, fields: { at: string; by?: string }): Promise<Changes> =>
      changes(
        await db.q().updateTable('invitations')
          .set(to === 'accepted' ? { state: to, accepted_at: fields.at, accepted_by: fields.by ?? null } : { state: to, revoked_at: fields.at })
          .where('id', '=', id).where('state', '=', from).executeTakeFirst(),
      ),

    async insertApiKey(k: ApiKeyRow): Promise<void> {
      await db.q().insertInto('api_keys').values(k).execute();
    },
    apiKeyByHash: (hash: string): Promise<ApiKeyRow | undefined> =>
      db.q().selectFrom('api_keys').selectAll().where('secret_hash', '=', hash).where('revoked_at', 'is', null).executeTakeFirst(),
    /**
     * A live key with its creator's role in the key's organization, in one statement (every API-key request reads
     * both); none when there is no such key or its creator is no longer a member.
     */
    apiKeyWithCreatorRole: (hash: string): Promise<(ApiKeyRow & { creator_role: Role }) | undefined> =>
      db.q().selectFrom('api_keys as k')
        .innerJoin('memberships as m', (j) => j.onRef('m.org_id', '=', 'k.org_id').onRef('m.user_id', '=', 'k.created_by'))
        .selectAll('k').select('m.role as creator_role')
        .where('k.secret_hash', '=', hash).where('k.revoked_at', 'is', null).executeTakeFirst(),
    apiKeyInOrg: (orgId: string, id: string): Promise<ApiKeyRow | undefined> =>
      db.q().selectFrom('api_keys').selectAll().where('org_id', '=', orgId).where('id', '=', id).where('revoked_at', 'is', null)
        .executeTakeFirst(),
    /** Who created a key, revoked or not (sessions it opened stay theirs). */
    apiKeyCreator: async (orgId: string, id: string): Promise<string | null> =>
      (await db.q().selectFrom('api_keys').select('created_by').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst())
        ?.created_by ?? null,
    apiKeysPage: (orgId: string, after: Keyset, limit: number): Promise<ApiKeyRow[]> =>
      db.q().selectFrom('api_keys').selectAll().where('org_id', '=', orgId).where('revoked_at', 'is', null).where((eb) => d.after(eb, after))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    touchApiKey: async (id: string, now: string): Promise<Changes> =>
      changes(await db.q().updateTable('api_keys').set({ last_used_at: now }).where('id', '=', id).executeTakeFirst()),
    revokeApiKey: async (id: string, now: string): Promise<Changes> =>
      changes(await db.q().updateTable('api_keys').set({ revoked_at: now }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst()),
  };
}
export type AccessRepo = ReturnType<typeof accessRepo>;

/** Invitations and API keys: the two ways into an organization besides signup. */
import type { InvitationState, Role, Scope } from '../../../../shared/schemas/org.js';
import type { Db } from '../db.js';
import { afterSql, type Keyset } from '../pagination.js';

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
  return {
    /** Marks pending invitations past their expiry as `expired`, so every read sees the true state. */
    expireInvitations: (now: string) =>
      db.run("UPDATE invitations SET state = 'expired' WHERE state = 'pending' AND expires_at <= ?", [now]),
    async insertInvitation(i: InvitationRow): Promise<void> {
      await db.run(
        `INSERT INTO invitations (id,org_id,email,role,state,token_hash,invited_by,created_at,expires_at,accepted_at,accepted_by,revoked_at)
         VALUES (@id,@org_id,@email,@role,@state,@token_hash,@invited_by,@created_at,@expires_at,@accepted_at,@accepted_by,@revoked_at)`,
        { ...i },
      );
    },
    invitationInOrg: (orgId: string, id: string) =>
      db.get<InvitationRow>('SELECT * FROM invitations WHERE org_id = ? AND id = ?', [orgId, id]),
    invitationByTokenHash: (hash: string) => db.get<InvitationRow>('SELECT * FROM invitations WHERE token_hash = ?', [hash]),
    pendingInvitationFor: (orgId: string, email: string) =>
      db.get<InvitationRow>("SELECT * FROM invitations WHERE org_id = ? AND email = ? AND state = 'pending'", [orgId, email]),
    countPendingInvitations: async (orgId: string) =>
      (await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM invitations WHERE org_id = ? AND state = 'pending'", [orgId]))!.n,
    invitationsPage: (orgId: string, after: Keyset, limit: number) =>
      db.all<InvitationRow>(`SELECT * FROM invitations WHERE org_id = @org AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`, {
        org: orgId, ca: after.created_at, cid: after.id, limit,
      }),
    /** Compare-and-set on the state read, so two concurrent accepts/revokes cannot both win. */
    moveInvitation: (id: string, from: InvitationState, to: InvitationState, fields: { at: string; by?: string }) =>
      to === 'accepted'
        ? db.run('UPDATE invitations SET state = ?, accepted_at = ?, accepted_by = ? WHERE id = ? AND state = ?', [to, fields.at, fields.by ?? null, id, from])
        : db.run('UPDATE invitations SET state = ?, revoked_at = ? WHERE id = ? AND state = ?', [to, fields.at, id, from]),

    async insertApiKey(k: ApiKeyRow): Promise<void> {
      await db.run(
        `INSERT INTO api_keys (id,org_id,created_by,name,prefix,secret_hash,scopes,created_at,last_used_at,revoked_at)
         VALUES (@id,@org_id,@created_by,@name,@prefix,@secret_hash,@scopes,@created_at,@last_used_at,@revoked_at)`,
        { ...k },
      );
    },
    apiKeyByHash: (hash: string) => db.get<ApiKeyRow>('SELECT * FROM api_keys WHERE secret_hash = ? AND revoked_at IS NULL', [hash]),
    apiKeyInOrg: (orgId: string, id: string) =>
      db.get<ApiKeyRow>('SELECT * FROM api_keys WHERE org_id = ? AND id = ? AND revoked_at IS NULL', [orgId, id]),
    /** Who created a key, revoked or not (sessions it opened stay theirs). */
    apiKeyCreator: async (orgId: string, id: string) =>
      (await db.get<{ created_by: string }>('SELECT created_by FROM api_keys WHERE org_id = ? AND id = ?', [orgId, id]))?.created_by ?? null,
    apiKeysPage: (orgId: string, after: Keyset, limit: number) =>
      db.all<ApiKeyRow>(`SELECT * FROM api_keys WHERE org_id = @org AND revoked_at IS NULL AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`, {
        org: orgId, ca: after.created_at, cid: after.id, limit,
      }),
    touchApiKey: (id: string, now: string) => db.run('UPDATE api_keys SET last_used_at = ? WHERE id = ?', [now, id]),
    revokeApiKey: (id: string, now: string) => db.run('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [now, id]),
  };
}
export type AccessRepo = ReturnType<typeof accessRepo>;

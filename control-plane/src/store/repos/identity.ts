/** Users, organizations, memberships and browser sessions. */
import type { Role } from '../../../../shared/schemas/org.js';
import type { Db } from '../db.js';
import { afterSql, type Keyset } from '../pagination.js';

export interface UserRow {
  id: string;
  email: string;
  name: string | null;
  password_hash: string;
  personal_org_id: string | null;
  created_at: string;
}
export interface OrgRow {
  id: string;
  name: string;
  personal: number;
  created_at: string;
}
export interface MembershipRow {
  id: string;
  org_id: string;
  user_id: string;
  role: Role;
  created_at: string;
}
export interface MemberView extends MembershipRow {
  email: string;
  name: string | null;
}
export interface AuthSessionRow {
  id: string;
  user_id: string;
  token_hash: string;
  active_org_id: string | null;
  created_at: string;
  last_used_at: string;
  expires_at: string;
  revoked_at: string | null;
}

export function identityRepo(db: Db) {
  return {
    async insertUser(u: UserRow): Promise<void> {
      await db.run('INSERT INTO users (id,email,name,password_hash,personal_org_id,created_at) VALUES (@id,@email,@name,@password_hash,@personal_org_id,@created_at)', { ...u });
    },
    userByEmail: (email: string) => db.get<UserRow>('SELECT * FROM users WHERE email = ?', [email]),
    userById: (id: string) => db.get<UserRow>('SELECT * FROM users WHERE id = ?', [id]),
    setPersonalOrg: (userId: string, orgId: string) => db.run('UPDATE users SET personal_org_id = ? WHERE id = ?', [orgId, userId]),

    async insertOrg(o: OrgRow): Promise<void> {
      await db.run('INSERT INTO organizations (id,name,personal,created_at) VALUES (@id,@name,@personal,@created_at)', { ...o });
    },
    orgById: (id: string) => db.get<OrgRow>('SELECT * FROM organizations WHERE id = ?', [id]),

    async insertMembership(m: MembershipRow): Promise<void> {
      await db.run('INSERT INTO memberships (id,org_id,user_id,role,created_at) VALUES (@id,@org_id,@user_id,@role,@created_at)', { ...m });
    },
    membership: (orgId: string, userId: string) =>
      db.get<MembershipRow>('SELECT * FROM memberships WHERE org_id = ? AND user_id = ?', [orgId, userId]),
    membershipInOrg: (orgId: string, id: string) =>
      db.get<MemberView>('SELECT m.*, u.email, u.name FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = ? AND m.id = ?', [orgId, id]),
    membershipsOfUser: (userId: string) =>
      db.all<MembershipRow & { org_name: string }>(
        'SELECT m.*, o.name AS org_name FROM memberships m JOIN organizations o ON o.id = m.org_id WHERE m.user_id = ? ORDER BY m.created_at, m.id',
        [userId],
      ),
    membersPage: (orgId: string, after: Keyset, limit: number) =>
      db.all<MemberView>(
        `SELECT m.*, u.email, u.name FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.org_id = @org AND ${afterSql('m')} ORDER BY m.created_at, m.id LIMIT @limit`,
        { org: orgId, ca: after.created_at, cid: after.id, limit },
      ),
    countMembers: async (orgId: string) => (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM memberships WHERE org_id = ?', [orgId]))!.n,
    countOwners: async (orgId: string) => (await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM memberships WHERE org_id = ? AND role = 'owner'", [orgId]))!.n,
    setRole: (id: string, role: Role) => db.run('UPDATE memberships SET role = ? WHERE id = ?', [role, id]),
    deleteMembership: (id: string) => db.run('DELETE FROM memberships WHERE id = ?', [id]),

    async insertSession(s: AuthSessionRow): Promise<void> {
      await db.run(
        'INSERT INTO auth_sessions (id,user_id,token_hash,active_org_id,created_at,last_used_at,expires_at,revoked_at) VALUES (@id,@user_id,@token_hash,@active_org_id,@created_at,@last_used_at,@expires_at,@revoked_at)',
        { ...s },
      );
    },
    sessionByTokenHash: (hash: string) => db.get<AuthSessionRow>('SELECT * FROM auth_sessions WHERE token_hash = ?', [hash]),
    sessionOfUser: (userId: string, id: string) => db.get<AuthSessionRow>('SELECT * FROM auth_sessions WHERE user_id = ? AND id = ?', [userId, id]),
    liveSessionsPage: (userId: string, now: string, after: Keyset, limit: number) =>
      db.all<AuthSessionRow>(
        `SELECT * FROM auth_sessions WHERE user_id = @user AND revoked_at IS NULL AND expires_at > @now AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`,
        { user: userId, now, ca: after.created_at, cid: after.id, limit },
      ),
    touchSession: (id: string, now: string) => db.run('UPDATE auth_sessions SET last_used_at = ? WHERE id = ?', [now, id]),
    revokeSession: (id: string, now: string) => db.run('UPDATE auth_sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [now, id]),
    setActiveOrg: (id: string, orgId: string) => db.run('UPDATE auth_sessions SET active_org_id = ? WHERE id = ?', [orgId, id]),
  };
}
export type IdentityRepo = ReturnType<typeof identityRepo>;

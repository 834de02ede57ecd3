/** Users, organizations, memberships and browser sessions. */
import type { Role } from '../../../../shared/schemas/org.js';
import type { Db } from '../db.js';
import type { Keyset } from '../pagination.js';
import { dialect } from './dialect.js';
import { changes, type Changes } from './results.js';

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
  const d = dialect(db.engine);
  const members = () => db.q().selectFrom('memberships as m').innerJoin('users as u', 'u.id', 'm.user_id').selectAll('m').select(['u.email', 'u.name']);
  const count = async (orgId: string, owners: boolean): Promise<number> =>
    (await db.q().selectFrom('memberships').select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.and([eb('org_id', '=', orgId), ...(owners ? [eb('role', '=', 'owner')] : [])])).executeTakeFirstOrThrow()).n;
  return {
    async insertUser(u: UserRow): Promise<void> {
      await db.q().insertInto('users').values(u).execute();
    },
    userByEmail: (email: string): Promise<UserRow | undefined> => db.q().selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst(),
    userById: (id: string): Promise<UserRow | undefined> => db.q().selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst(),
    setPersonalOrg: async (userId: string, orgId: string): Promise<Changes> =>
      changes(await db.q().updateTable('users').set({ personal_org_id: orgId }).where('id', '=', userId).executeTakeFirst()),

    async insertOrg(o: OrgRow): Promise<void> {
      await db.q().insertInto('organizations').values(o).execute();
    },
    orgById: (id: string): Promise<OrgRow | undefined> => db.q().selectFrom('organizations').selectAll().where('id', '=', id).executeTakeFirst(),
    /**
     * Serializes, until the transaction ends, every transaction that counts this organization's machines, snapshots
     * or sessions against a quota and then inserts (issue 24 item 2): call it inside `db.tx`, first, before the count.
     * PostgreSQL: `SELECT … FOR NO KEY UPDATE` on the organization's row (it conflicts with itself but not with the FOR KEY SHARE a foreign-key insert takes on the row — FOR UPDATE deadlocked concurrent session opens with event inserts), so a second process's transaction waits here until
     * the first commits, then counts what the first inserted (READ COMMITTED reads the newest committed rows at each
     * statement). SQLite: nothing to do, BEGIN IMMEDIATE already serializes whole write transactions. Outside a
     * transaction it locks nothing (PostgreSQL releases the lock at once).
     */
    async lockOrg(orgId: string): Promise<void> {
      if (!d.rowLocks) return;
      await db.q().selectFrom('organizations').select('id').where('id', '=', orgId).forNoKeyUpdate().execute();
    },

    async insertMembership(m: MembershipRow): Promise<void> {
      await db.q().insertInto('memberships').values(m).execute();
    },
    membership: (orgId: string, userId: string): Promise<MembershipRow | undefined> =>
      db.q().selectFrom('memberships').selectAll().where('org_id', '=', orgId).where('user_id', '=', userId).executeTakeFirst(),
    membershipInOrg: (orgId: string, id: string): Promise<MemberView | undefined> =>
      members().where('m.org_id', '=', orgId).where('m.id', '=', id).executeTakeFirst(),
    membershipsOfUser: (userId: string): Promise<Array<MembershipRow & { org_name: string }>> =>
      db.q().selectFrom('memberships as m').innerJoin('organizations as o', 'o.id', 'm.org_id').selectAll('m').select('o.name as org_name')
        .where('m.user_id', '=', userId).orderBy('m.created_at', d.asc).orderBy('m.id', d.asc).execute(),
    membersPage: (orgId: string, after: Keyset, limit: number): Promise<MemberView[]> =>
      members().where('m.org_id', '=', orgId).where((eb) => d.after(eb, after, 'm')).orderBy('m.created_at', d.asc).orderBy('m.id', d.asc)
        .limit(limit).execute(),
    countMembers: (orgId: string): Promise<number> => count(orgId, false),
    countOwners: (orgId: string): Promise<number> => count(orgId, true),
    setRole: async (id: string, role: Role): Promise<Changes> =>
      changes(await db.q().updateTable('memberships').set({ role }).where('id', '=', id).executeTakeFirst()),
    deleteMembership: async (id: string): Promise<Changes> => changes(await db.q().deleteFrom('memberships').where('id', '=', id).executeTakeFirst()),

    async insertSession(s: AuthSessionRow): Promise<void> {
      await db.q().insertInto('auth_sessions').values(s).execute();
    },
    sessionByTokenHash: (hash: string): Promise<AuthSessionRow | undefined> =>
      db.q().selectFrom('auth_sessions').selectAll().where('token_hash', '=', hash).executeTakeFirst(),
    sessionOfUser: (userId: string, id: string): Promise<AuthSessionRow | undefined> =>
      db.q().selectFrom('auth_sessions').selectAll().where('user_id', '=', userId).where('id', '=', id).executeTakeFirst(),
    liveSessionsPage: (userId: string, now: string, after: Keyset, limit: number): Promise<AuthSessionRow[]> =>
      db.q().selectFrom('auth_sessions').selectAll().where('user_id', '=', userId).where('revoked_at', 'is', null)
        .where((eb) => eb.and([eb(d.bytes('expires_at'), '>', now), d.after(eb, after)]))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    touchSession: async (id: string, now: string): Promise<Changes> =>
      changes(await db.q().updateTable('auth_sessions').set({ last_used_at: now }).where('id', '=', id).executeTakeFirst()),
    revokeSession: async (id: string, now: string): Promise<Changes> =>
      changes(await db.q().updateTable('auth_sessions').set({ revoked_at: now }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst()),
    setActiveOrg: async (id: string, orgId: string): Promise<Changes> =>
      changes(await db.q().updateTable('auth_sessions').set({ active_org_id: orgId }).where('id', '=', id).executeTakeFirst()),
  };
}
export type IdentityRepo = ReturnType<typeof identityRepo>;

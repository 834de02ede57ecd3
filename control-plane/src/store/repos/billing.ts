/** Billing accounts, their event history, one-time provider links and enterprise overrides. */
import { sql, type SqlBool } from 'kysely';
import type { BillingState } from '../../../../shared/schemas/billing.js';
import type { Db } from '../db.js';
import { dialect } from './dialect.js';
import { changes, type Changes } from './results.js';

export interface BillingAccountRow {
  org_id: string;
  state: BillingState;
  plan_id: string | null;
  catalog_version: string | null;
  provider: string;
  trial_ends_at: string | null;
  period_start: string | null;
  period_end: string | null;
  updated_at: string;
}

export interface BillingLinkRow {
  token_hash: string;
  kind: 'checkout' | 'portal';
  org_id: string;
  plan_id: string | null;
  return_url: string | null;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

export interface OverrideRow {
  id: string;
  org_id: string;
  entitlements: string;
  effective_from: string;
  effective_until: string | null;
  created_at: string;
}

export function billingRepo(db: Db) {
  const d = dialect(db.engine);
  /** An override (as `o`) in force at `at`; of several, the latest effective, then the latest created, is the one. */
  const inForceAt = (at: string) =>
    sql<SqlBool>`${d.bytes('o.effective_from')} <= ${at} and (${sql.ref('o.effective_until')} is null or ${d.bytes('o.effective_until')} > ${at})`;
  return {
    async insertAccount(a: BillingAccountRow): Promise<void> {
      await db.q().insertInto('billing_accounts').values(a).execute();
    },
    account: (orgId: string): Promise<BillingAccountRow | undefined> =>
      db.q().selectFrom('billing_accounts').selectAll().where('org_id', '=', orgId).executeTakeFirst(),
    /** Compare-and-set on the state that was read. */
    updateAccount: async (a: BillingAccountRow, expectedState: BillingState): Promise<Changes> =>
      changes(
        await db.q().updateTable('billing_accounts')
          .set({
            state: a.state, plan_id: a.plan_id, catalog_version: a.catalog_version, trial_ends_at: a.trial_ends_at,
            period_start: a.period_start, period_end: a.period_end, updated_at: a.updated_at,
          })
          .where('org_id', '=', a.org_id).where('state', '=', expectedState).executeTakeFirst(),
      ),
    dueTrials: (now: string): Promise<BillingAccountRow[]> =>
      db.q().selectFrom('billing_accounts').selectAll().where('state', '=', 'trialing').where((eb) => eb(d.bytes('trial_ends_at'), '<=', now))
        .orderBy('trial_ends_at', d.asc).orderBy('org_id', d.asc).execute(),
    insertEvent: async (e: { id: string; org_id: string; type: string; from_state: string; to_state: string; created_at: string }): Promise<Changes> =>
      changes(await db.q().insertInto('billing_events').values(e).executeTakeFirst()),
    /** Oldest first; events of one instant in the order they were recorded (their seq, migration 12), on both engines. */
    events: (orgId: string): Promise<Array<{ type: string; from_state: string; to_state: string; created_at: string }>> =>
      db.q().selectFrom('billing_events').select(['type', 'from_state', 'to_state', 'created_at']).where('org_id', '=', orgId)
        .orderBy('created_at', d.asc).orderBy('seq', 'asc').execute(),

    async insertLink(l: BillingLinkRow): Promise<void> {
      await db.q().insertInto('billing_links').values(l).execute();
    },
    link: (hash: string, kind: BillingLinkRow['kind']): Promise<BillingLinkRow | undefined> =>
      db.q().selectFrom('billing_links').selectAll().where('token_hash', '=', hash).where('kind', '=', kind).executeTakeFirst(),
    /** One-time use: only the first caller gets changes = 1. */
    useLink: async (hash: string, now: string): Promise<Changes> =>
      changes(await db.q().updateTable('billing_links').set({ used_at: now }).where('token_hash', '=', hash).where('used_at', 'is', null).executeTakeFirst()),

    insertOverride: async (o: OverrideRow): Promise<Changes> => changes(await db.q().insertInto('entitlement_overrides').values(o).executeTakeFirst()),
    overrideAt: (orgId: string, at: string): Promise<OverrideRow | undefined> =>
      db.q().selectFrom('entitlement_overrides as o').selectAll('o').where('o.org_id', '=', orgId).where(inForceAt(at))
        .orderBy('o.effective_from', d.desc).orderBy('o.created_at', d.desc).limit(1).executeTakeFirst(),
    /**
     * The account and the entitlements of the override in force at `at` (`overrideAt`'s, null: none), in one
     * statement: what every quota check reads.
     */
    accountWithOverride: async (orgId: string, at: string): Promise<{ account: BillingAccountRow; override: string | null } | undefined> => {
      const r = await db.q().selectFrom('billing_accounts as a').selectAll('a')
        .select((eb) => eb.selectFrom('entitlement_overrides as o').select('o.entitlements').whereRef('o.org_id', '=', 'a.org_id').where(inForceAt(at))
          .orderBy('o.effective_from', d.desc).orderBy('o.created_at', d.desc).limit(1).as('override'))
        .where('a.org_id', '=', orgId).executeTakeFirst();
      if (!r) return undefined;
      const { override, ...account } = r;
      return { account, override };
    },
  };
}
export type BillingRepo = ReturnType<typeof billingRepo>;

export function rateLimitRepo(db: Db) {
  const d = dialect(db.engine);
  return {
    /**
     * Serializes, until the transaction ends, every read-decide-write of `bucket` (issue 24 item 2: limits shared by
     * processes). PostgreSQL: a transaction-scoped advisory lock on the bucket's hash, held even while the bucket has
     * no row yet (a row lock could not be). SQLite: nothing to do, BEGIN IMMEDIATE serializes write transactions.
     */
    async lock(bucket: string): Promise<void> {
      if (!d.rowLocks) return;
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${bucket}, 0))`.execute(db.q());
    },
    get: (bucket: string): Promise<{ window_start_ms: number; count: number } | undefined> =>
      db.q().selectFrom('rate_limits').select(['window_start_ms', 'count']).where('bucket', '=', bucket).executeTakeFirst(),
    put: async (bucket: string, w: { window_start_ms: number; count: number }): Promise<Changes> =>
      changes(
        await db.q().insertInto('rate_limits').values({ bucket, window_start_ms: w.window_start_ms, count: w.count })
          .onConflict((oc) => oc.column('bucket').doUpdateSet((eb) => ({ window_start_ms: eb.ref('excluded.window_start_ms'), count: eb.ref('excluded.count') })))
          .executeTakeFirst(),
      ),
    clear: async (bucket: string): Promise<Changes> => changes(await db.q().deleteFrom('rate_limits').where('bucket', '=', bucket).executeTakeFirst()),
  };
}
export type RateLimitRepo = ReturnType<typeof rateLimitRepo>;

/** Billing accounts, their event history, one-time provider links and enterprise overrides. */
import type { BillingState } from '../../../../shared/schemas/billing.js';
import type { Db } from '../db.js';

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
  return {
    async insertAccount(a: BillingAccountRow): Promise<void> {
      await db.run(
        `INSERT INTO billing_accounts (org_id,state,plan_id,catalog_version,provider,trial_ends_at,period_start,period_end,updated_at)
         VALUES (@org_id,@state,@plan_id,@catalog_version,@provider,@trial_ends_at,@period_start,@period_end,@updated_at)`,
        { ...a },
      );
    },
    account: (orgId: string) => db.get<BillingAccountRow>('SELECT * FROM billing_accounts WHERE org_id = ?', [orgId]),
    /** Compare-and-set on the state that was read. */
    updateAccount: (a: BillingAccountRow, expectedState: BillingState) =>
      db.run(
        `UPDATE billing_accounts SET state=@state, plan_id=@plan_id, catalog_version=@catalog_version, trial_ends_at=@trial_ends_at,
         period_start=@period_start, period_end=@period_end, updated_at=@updated_at WHERE org_id=@org_id AND state=@expected`,
        {
          org_id: a.org_id, state: a.state, plan_id: a.plan_id, catalog_version: a.catalog_version, trial_ends_at: a.trial_ends_at,
          period_start: a.period_start, period_end: a.period_end, updated_at: a.updated_at, expected: expectedState,
        },
      ),
    dueTrials: (now: string) =>
      db.all<BillingAccountRow>("SELECT * FROM billing_accounts WHERE state = 'trialing' AND trial_ends_at <= ?", [now]),
    insertEvent: (e: { id: string; org_id: string; type: string; from_state: string; to_state: string; created_at: string }) =>
      db.run('INSERT INTO billing_events (id,org_id,type,from_state,to_state,created_at) VALUES (@id,@org_id,@type,@from_state,@to_state,@created_at)', { ...e }),
    events: (orgId: string) =>
      db.all<{ type: string; from_state: string; to_state: string; created_at: string }>(
        'SELECT type, from_state, to_state, created_at FROM billing_events WHERE org_id = ? ORDER BY created_at, rowid',
        [orgId],
      ),

    async insertLink(l: BillingLinkRow): Promise<void> {
      await db.run(
        'INSERT INTO billing_links (token_hash,kind,org_id,plan_id,return_url,created_at,expires_at,used_at) VALUES (@token_hash,@kind,@org_id,@plan_id,@return_url,@created_at,@expires_at,@used_at)',
        { ...l },
      );
    },
    link: (hash: string, kind: BillingLinkRow['kind']) =>
      db.get<BillingLinkRow>('SELECT * FROM billing_links WHERE token_hash = ? AND kind = ?', [hash, kind]),
    /** One-time use: only the first caller gets changes = 1. */
    useLink: (hash: string, now: string) => db.run('UPDATE billing_links SET used_at = ? WHERE token_hash = ? AND used_at IS NULL', [now, hash]),

    insertOverride: (o: OverrideRow) =>
      db.run('INSERT INTO entitlement_overrides (id,org_id,entitlements,effective_from,effective_until,created_at) VALUES (@id,@org_id,@entitlements,@effective_from,@effective_until,@created_at)', { ...o }),
    overrideAt: (orgId: string, at: string) =>
      db.get<OverrideRow>(
        `SELECT * FROM entitlement_overrides WHERE org_id = ? AND effective_from <= ? AND (effective_until IS NULL OR effective_until > ?)
         ORDER BY effective_from DESC, created_at DESC LIMIT 1`,
        [orgId, at, at],
      ),
  };
}
export type BillingRepo = ReturnType<typeof billingRepo>;

export function rateLimitRepo(db: Db) {
  return {
    get: (bucket: string) => db.get<{ window_start_ms: number; count: number }>('SELECT window_start_ms, count FROM rate_limits WHERE bucket = ?', [bucket]),
    put: (bucket: string, w: { window_start_ms: number; count: number }) =>
      db.run(
        'INSERT INTO rate_limits (bucket, window_start_ms, count) VALUES (?, ?, ?) ON CONFLICT(bucket) DO UPDATE SET window_start_ms = excluded.window_start_ms, count = excluded.count',
        [bucket, w.window_start_ms, w.count],
      ),
    clear: (bucket: string) => db.run('DELETE FROM rate_limits WHERE bucket = ?', [bucket]),
  };
}
export type RateLimitRepo = ReturnType<typeof rateLimitRepo>;

/** The Stripe provider's own rows: customers, processed webhook events, reported meter quantities. */
import type { Db } from '../db.js';

export interface StripeCustomerRow {
  org_id: string;
  customer_id: string;
  subscription_id: string | null;
  last_event_created: number | null;
  created_at: string;
}

export interface MeterReportRow {
  org_id: string;
  period_start: string;
  period_end: string;
  meter: string;
  reported: number;
  pending: number | null;
  closed: number;
}

export function stripeRepo(db: Db) {
  return {
    customer: (orgId: string) => db.get<StripeCustomerRow>('SELECT * FROM stripe_customers WHERE org_id = ?', [orgId]),
    customerById: (customerId: string) => db.get<StripeCustomerRow>('SELECT * FROM stripe_customers WHERE customer_id = ?', [customerId]),
    customers: () => db.all<StripeCustomerRow>('SELECT * FROM stripe_customers ORDER BY org_id'),
    insertCustomer: (r: StripeCustomerRow) =>
      db.run(
        'INSERT INTO stripe_customers (org_id,customer_id,subscription_id,last_event_created,created_at) VALUES (@org_id,@customer_id,@subscription_id,@last_event_created,@created_at)',
        { ...r },
      ),
    setSubscription: (orgId: string, subscriptionId: string | null, created: number) =>
      db.run('UPDATE stripe_customers SET subscription_id = ?, last_event_created = MAX(COALESCE(last_event_created, 0), ?) WHERE org_id = ?', [subscriptionId, created, orgId]),

    /** Records a webhook event id; false when it was processed before (a replay or a retry). */
    markEvent: async (e: { id: string; type: string; org_id: string | null; outcome: string; received_at: string }) =>
      (await db.run('INSERT OR IGNORE INTO stripe_webhook_events (id,type,org_id,outcome,received_at) VALUES (@id,@type,@org_id,@outcome,@received_at)', { ...e })).changes === 1,
    event: (id: string) => db.get<{ id: string; type: string; org_id: string | null; outcome: string }>('SELECT id, type, org_id, outcome FROM stripe_webhook_events WHERE id = ?', [id]),

    reports: (orgId: string) => db.all<MeterReportRow>('SELECT * FROM stripe_meter_reports WHERE org_id = ? ORDER BY period_start, meter', [orgId]),
    ensureReport: (orgId: string, periodStart: string, periodEnd: string, meter: string) =>
      db.run('INSERT OR IGNORE INTO stripe_meter_reports (org_id,period_start,period_end,meter) VALUES (?,?,?,?)', [orgId, periodStart, periodEnd, meter]),
    /** Compare-and-set on the acknowledged quantity: only one reporter moves it. */
    setPending: (orgId: string, periodStart: string, meter: string, reported: number, pending: number) =>
      db.run('UPDATE stripe_meter_reports SET pending = ? WHERE org_id = ? AND period_start = ? AND meter = ? AND reported = ? AND pending IS NULL', [pending, orgId, periodStart, meter, reported]),
    acknowledge: (orgId: string, periodStart: string, meter: string, pending: number) =>
      db.run('UPDATE stripe_meter_reports SET reported = pending, pending = NULL WHERE org_id = ? AND period_start = ? AND meter = ? AND pending = ?', [orgId, periodStart, meter, pending]),
    closePeriod: (orgId: string, periodStart: string, periodEnd: string) =>
      db.run('UPDATE stripe_meter_reports SET closed = 1, period_end = ? WHERE org_id = ? AND period_start = ?', [periodEnd, orgId, periodStart]),
  };
}
export type StripeRepo = ReturnType<typeof stripeRepo>;

/** The Stripe provider's own rows: customers, processed webhook events, reported meter quantities. */
import type { Db } from '../db.js';
import { dialect } from './dialect.js';
import { changes, one, type Changes } from './results.js';

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
  const d = dialect(db.engine);
  const report = (orgId: string, periodStart: string, meter: string) =>
    db.q().updateTable('stripe_meter_reports').where('org_id', '=', orgId).where('period_start', '=', periodStart).where('meter', '=', meter);
  return {
    customer: (orgId: string): Promise<StripeCustomerRow | undefined> =>
      db.q().selectFrom('stripe_customers').selectAll().where('org_id', '=', orgId).executeTakeFirst(),
    customerById: (customerId: string): Promise<StripeCustomerRow | undefined> =>
      db.q().selectFrom('stripe_customers').selectAll().where('customer_id', '=', customerId).executeTakeFirst(),
    customers: (): Promise<StripeCustomerRow[]> => db.q().selectFrom('stripe_customers').selectAll().orderBy('org_id', d.asc).execute(),
    /**
     * Links the organization to `r.customer_id` unless it has a customer already (then changes nothing: `changes` 0).
     * On PostgreSQL an insert racing another process's for the same organization waits for it and does nothing.
     */
    linkCustomer: async (r: StripeCustomerRow): Promise<Changes> =>
      changes(await db.q().insertInto('stripe_customers').values(r).onConflict((oc) => oc.column('org_id').doNothing()).executeTakeFirst()),
    /** The subscription now, and the newest event second applied (never moved back by an older event). */
    setSubscription: async (orgId: string, subscriptionId: string | null, created: number): Promise<Changes> =>
      changes(
        await db.q().updateTable('stripe_customers')
          .set((eb) => ({
            subscription_id: subscriptionId,
            last_event_created: eb.case().when(eb.fn.coalesce('last_event_created', eb.lit(0)), '>', created).then(eb.ref('last_event_created')).else(created).end(),
          }))
          .where('org_id', '=', orgId).executeTakeFirst(),
      ),

    /** Records a webhook event id; false when it was processed before (a replay or a retry). */
    markEvent: async (e: { id: string; type: string; org_id: string | null; outcome: string; received_at: string }): Promise<boolean> =>
      one(await db.q().insertInto('stripe_webhook_events').values(e).onConflict((oc) => oc.doNothing()).executeTakeFirst()),
    event: (id: string): Promise<{ id: string; type: string; org_id: string | null; outcome: string } | undefined> =>
      db.q().selectFrom('stripe_webhook_events').select(['id', 'type', 'org_id', 'outcome']).where('id', '=', id).executeTakeFirst(),

    reports: (orgId: string): Promise<MeterReportRow[]> =>
      db.q().selectFrom('stripe_meter_reports').selectAll().where('org_id', '=', orgId).orderBy('period_start', d.asc).orderBy('meter', d.asc).execute(),
    ensureReport: async (orgId: string, periodStart: string, periodEnd: string, meter: string): Promise<Changes> =>
      changes(
        await db.q().insertInto('stripe_meter_reports').values({ org_id: orgId, period_start: periodStart, period_end: periodEnd, meter })
          .onConflict((oc) => oc.doNothing()).executeTakeFirst(),
      ),
    /** Compare-and-set on the acknowledged quantity: only one reporter moves it. */
    setPending: async (orgId: string, periodStart: string, meter: string, reported: number, pending: number): Promise<Changes> =>
      changes(await report(orgId, periodStart, meter).set({ pending }).where('reported', '=', reported).where('pending', 'is', null).executeTakeFirst()),
    /** The quantity in flight is acknowledged: it becomes the reported one (compare-and-set on it). */
    acknowledge: async (orgId: string, periodStart: string, meter: string, pending: number): Promise<Changes> =>
      changes(await report(orgId, periodStart, meter).set({ reported: pending, pending: null }).where('pending', '=', pending).executeTakeFirst()),
    closePeriod: async (orgId: string, periodStart: string, periodEnd: string): Promise<Changes> =>
      changes(
        await db.q().updateTable('stripe_meter_reports').set({ closed: 1, period_end: periodEnd }).where('org_id', '=', orgId)
          .where('period_start', '=', periodStart).executeTakeFirst(),
      ),
  };
}
export type StripeRepo = ReturnType<typeof stripeRepo>;

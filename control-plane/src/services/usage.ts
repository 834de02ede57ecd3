/**
 * Reading usage: raw records, series, the usage summary of a period, and the trial's limits.
 *
 * Periods are counted in whole UTC hours: a period's usage is the records whose hour starts in
 * [hour(period start), hour(period end)), so every hour belongs to exactly one period (records never
 * straddle an hour). A period whose end has passed is summarized once, after a flush, and stored: that
 * `final` summary never changes afterwards, even if the catalog does.
 */
import { invalid } from '../../../shared/errors.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import { DEFAULT_PAGE_SIZE } from '../../../shared/schemas/pagination.js';
import type { Meter, UsageListQuery, UsageRecord, UsageSeries, UsageSeriesQuery, UsageSummary, UsageSummaryQuery } from '../../../shared/schemas/usage.js';
import { findPlan, trialTerms, type CatalogVersion, type Entitlements } from '../domain/catalog.js';
import { bucketOf, bucketWidth, DAY_MS, hourOf, HOUR_MS } from '../domain/metering.js';
import { emptyTotals, priceSummary, trialExhaustion, type Exhaustion, type SummaryTerms, type Totals } from '../domain/usage-summary.js';
import { decodeCursor, encodeCursor } from '../store/pagination.js';
import type { BillingAccountRow } from '../store/repos/billing.js';
import type { UsageRecordRow } from '../store/repos/usage.js';
import type { Store } from '../store/store.js';
import type { BillingService } from './billing.js';
import type { MeteringService } from './metering.js';
import { ERRORS } from '../errors.js';

/** The longest range a list or series may ask for. */
export const MAX_RANGE_MS = 400 * DAY_MS;
const DEFAULT_RANGE_MS = 30 * DAY_MS;

const iso = (ms: number) => new Date(ms).toISOString();

function recordView(r: UsageRecordRow): UsageRecord {
  const start = Date.parse(r.hour);
  return {
    id: r.id, meter: r.meter, size: r.size === '' ? null : r.size, quantity: r.quantity, machine_id: r.machine_id,
    template_id: r.template_id, start: r.hour, end: iso(start + HOUR_MS), updated_at: r.updated_at,
  };
}

export function createUsageService(d: { store: Store; now: () => Date; billing: BillingService; metering: MeteringService }) {
  const { store, billing } = d;

  /** [start, end) of a query: the account's current period by default (else the last 30 days). */
  async function range(orgId: string, q: { start?: string; end?: string }): Promise<{ start: number; end: number }> {
    const a = await store.billing.account(orgId);
    const now = d.now().getTime();
    const end = q.end ? Date.parse(q.end) : a?.period_end && !q.start ? Math.min(Date.parse(a.period_end), now) : now;
    const start = q.start ? Date.parse(q.start) : a?.period_start && !q.end ? Date.parse(a.period_start) : end - DEFAULT_RANGE_MS;
    if (!(start < end)) throw invalid('start must be before end.', [{ field: 'start', message: 'must be before end' }]);
    if (end - start > MAX_RANGE_MS) throw invalid('The range is too long.', [{ field: 'end', message: `at most ${MAX_RANGE_MS / DAY_MS} days after start` }]);
    return { start, end };
  }

  async function totals(orgId: string, startMs: number, endMs: number): Promise<Totals> {
    const t = emptyTotals();
    for (const r of await store.usage.daily(orgId, iso(hourOf(startMs)), iso(hourOf(endMs)))) t[r.meter] += BigInt(r.q);
    return t;
  }

  /**
   * The allowances pricing an account's period: the trial's while trialing, else the plan's (or agreement's).
   * `known`: the account's entitlements, already read (a quota check's basis).
   */
  async function termsFor(a: BillingAccountRow, cat: CatalogVersion, known?: { entitlements: Entitlements | null }): Promise<SummaryTerms> {
    const e = known ? known.entitlements : await billing.entitlements(a);
    if (a.state === 'trialing' && a.plan_id) {
      const t = trialTerms(cat, a.plan_id);
      return {
        included_compute_standard_hours: t.included_compute_standard_hours, included_hot_storage_gb: e?.included_hot_storage_gb ?? null,
        included_egress_gb: t.included_egress_gb, overage_allowed: t.overage_allowed,
      };
    }
    return {
      included_compute_standard_hours: e?.included_compute_standard_hours ?? null, included_hot_storage_gb: e?.included_hot_storage_gb ?? null,
      included_egress_gb: 0, overage_allowed: e?.overage_allowed ?? true,
    };
  }

  async function build(a: BillingAccountRow, startMs: number, endMs: number, meteredUntilMs: number, status: 'estimate' | 'final'): Promise<UsageSummary> {
    const cat = billing.catalogFor(a);
    const terms = await termsFor(a, cat);
    const priced = priceSummary(cat, terms, await totals(a.org_id, startMs, endMs), BigInt(Math.round((endMs - startMs) / 1000)));
    return {
      organization_id: a.org_id, status, catalog_version: cat.version, plan_id: a.plan_id ?? 'none', trial: a.state === 'trialing',
      overage_allowed: terms.overage_allowed, currency: cat.currency, period: { start: iso(startMs), end: iso(endMs) },
      metered_until: iso(meteredUntilMs), ...priced,
    };
  }

  /** Records and stores the final summary of a period that ended at `endMs` (idempotent). */
  async function finalize(a: BillingAccountRow, endMs: number): Promise<UsageSummary> {
    const start = a.period_start!;
    const stored = await store.usage.finalSummary(a.org_id, start);
    if (stored) return JSON.parse(stored) as UsageSummary;
    await d.metering.flush();
    const s = await build(a, Date.parse(start), endMs, endMs, 'final');
    // Of two finalizations at once the first insert wins (INSERT OR IGNORE) and both answer what was stored.
    await store.usage.insertFinal(a.org_id, start, JSON.stringify(s), d.now().toISOString());
    return JSON.parse((await store.usage.finalSummary(a.org_id, start))!) as UsageSummary;
  }

  // A period closes when the provider starts a new one (trial converted, resubscribed): it is summarized
  // under the account as it was, with the allowances of that period (a trial's included compute).
  billing.onPeriodClose(async (old, at) => {
    if (old.period_start) await finalize(old, Math.min(Date.parse(at), old.period_end ? Date.parse(old.period_end) : Infinity));
  });

  return {
    /** Totals of the records whose hour starts in [hour(start), hour(end)) (the Stripe reporter's source). */
    totals,
    async list(orgId: string, q: UsageListQuery): Promise<Page<UsageRecord>> {
      const { start, end } = await range(orgId, q);
      const limit = q.limit ?? DEFAULT_PAGE_SIZE;
      // The keyset is (hour, id): the shared cursor's `created_at` slot carries the hour.
      const after = decodeCursor(q.cursor) ?? { created_at: '', id: '' };
      const rows = await store.usage.page(orgId, { start: iso(hourOf(start)), end: iso(end), meter: q.meter ?? null }, { hour: after.created_at, id: after.id }, limit + 1);
      const more = rows.length > limit;
      const shown = more ? rows.slice(0, limit) : rows;
      return { data: shown.map(recordView), next_cursor: more ? encodeCursor({ created_at: shown[shown.length - 1]!.hour, id: shown[shown.length - 1]!.id }) : null };
    },
    async series(orgId: string, q: UsageSeriesQuery): Promise<UsageSeries> {
      const { start, end } = await range(orgId, q);
      const width = bucketWidth(start, end);
      const byMeter = new Map<Meter, Map<number, bigint>>();
      for (const r of await store.usage.hourly(orgId, iso(hourOf(start)), iso(end), q.meter ?? null)) {
        const b = bucketOf(width, Date.parse(r.hour));
        const m = byMeter.get(r.meter) ?? new Map<number, bigint>();
        m.set(b, (m.get(b) ?? 0n) + BigInt(r.q));
        byMeter.set(r.meter, m);
      }
      const data = [...byMeter.entries()].map(([meter, buckets]) => ({
        meter,
        buckets: [...buckets.entries()].filter(([, v]) => v > 0n).sort(([x], [y]) => x - y).map(([s, v]) => ({ start: iso(s), quantity: v.toString() })),
      })).filter((s) => s.buckets.length > 0);
      return { start: iso(start), end: iso(end), bucket_width: width, data };
    },
    async summary(orgId: string, q: UsageSummaryQuery): Promise<UsageSummary> {
      const a = await billing.account(orgId);
      if (q.period_start && (!a.period_start || Date.parse(q.period_start) !== Date.parse(a.period_start))) {
        const stored = await store.usage.finalSummary(orgId, new Date(q.period_start).toISOString());
        if (!stored) throw ERRORS.noClosedPeriod();
        return JSON.parse(stored) as UsageSummary;
      }
      if (!a.period_start || !a.period_end) throw ERRORS.noBillingPeriodYet();
      const now = d.now().getTime();
      const end = Date.parse(a.period_end);
      if (now >= end) return finalize(a, end);
      return build(a, Date.parse(a.period_start), end, now, 'estimate');
    },
    /**
     * A trial without overage that used up its compute or egress, or null. `known`: the organization's account and
     * entitlements, already read in this transaction (a quota check's basis).
     */
    async exhaustion(orgId: string, known?: { account: BillingAccountRow; entitlements: Entitlements | null }): Promise<Exhaustion | null> {
      const a = known ? known.account : await store.billing.account(orgId);
      if (!a || a.state !== 'trialing' || !a.plan_id || !a.period_start || !findPlan(billing.catalogFor(a), a.plan_id)) return null;
      const cat = billing.catalogFor(a);
      return trialExhaustion(cat, await termsFor(a, cat, known), await totals(orgId, Date.parse(a.period_start), d.now().getTime() + HOUR_MS));
    },
  };
}
export type UsageService = ReturnType<typeof createUsageService>;

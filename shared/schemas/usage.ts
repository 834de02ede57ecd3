/**
 * Usage records, series and the usage summary (docs/usage-and-billing.md). Quantities are exact
 * integers that can exceed 2^53 (byte-seconds), so they travel as decimal strings.
 */
import { z } from 'zod';
import { MachineSize } from './machine.js';
import { PageQuery } from './pagination.js';

export const METERS = [
  'compute_small_seconds',
  'compute_standard_seconds',
  'compute_large_seconds',
  'hot_storage_byte_seconds',
  'cold_storage_byte_seconds',
  'egress_bytes',
] as const;
export const Meter = z.enum(METERS);
export type Meter = z.infer<typeof Meter>;

const Instant = z.iso.datetime({ offset: true, error: 'must be an ISO-8601 timestamp' });

/** `start`/`end` default to the account's current period (or the last 30 days without one). */
const Range = {
  start: Instant.optional(),
  end: Instant.optional(),
  meter: Meter.optional(),
};

export const UsageListQuery = PageQuery.extend(Range);
export type UsageListQuery = z.infer<typeof UsageListQuery>;

export const UsageSeriesQuery = z.strictObject(Range);
export type UsageSeriesQuery = z.infer<typeof UsageSeriesQuery>;

const Decimal = z.string().regex(/^\d+(\.\d+)?$/);

export const UsageRecord = z.strictObject({
  id: z.string(),
  meter: Meter,
  size: MachineSize.nullable(),
  quantity: Decimal,
  machine_id: z.string().nullable(),
  /** A template's cold storage has no machine; this names the template instead. */
  template_id: z.string().nullable(),
  /** The UTC hour the record covers: a record never straddles an hour. */
  start: z.string(),
  end: z.string(),
  updated_at: z.string(),
});
export type UsageRecord = z.infer<typeof UsageRecord>;

export const UsageSeries = z.strictObject({
  start: z.string(),
  end: z.string(),
  bucket_width: z.enum(['hour', 'day']),
  /** Per meter, buckets in time order; a bucket with nothing in it is absent. */
  data: z.array(z.strictObject({
    meter: Meter,
    buckets: z.array(z.strictObject({ start: z.string(), quantity: Decimal })),
  })),
});
export type UsageSeries = z.infer<typeof UsageSeries>;

export const UsageSummaryQuery = z.strictObject({
  /** A past period (its start, as in GET /v1/billing); default: the current period. */
  period_start: Instant.optional(),
});
export type UsageSummaryQuery = z.infer<typeof UsageSummaryQuery>;

export const SummaryLine = z.strictObject({
  meter: Meter,
  unit: z.enum(['seconds', 'byte_seconds', 'bytes']),
  /** Compute lines: the size's weight in thousandths of a standard-hour per hour. */
  weight_milli: z.number().int().nullable(),
  quantity: Decimal,
  /** null: negotiated (no allowance stated). */
  included: Decimal.nullable(),
  billable: Decimal,
  /** Currency per unit of `price_unit`; "0" when the plan cannot incur overage. */
  unit_price: Decimal,
  price_unit: z.enum(['standard_hour', 'gb_month', 'gb']),
  amount: Decimal,
});
export type SummaryLine = z.infer<typeof SummaryLine>;

export const UsageSummary = z.strictObject({
  organization_id: z.string(),
  status: z.enum(['estimate', 'final']),
  catalog_version: z.string(),
  plan_id: z.string(),
  trial: z.boolean(),
  overage_allowed: z.boolean(),
  currency: z.string(),
  period: z.strictObject({ start: z.string(), end: z.string() }),
  /** Usage up to this instant (the period's end once final). */
  metered_until: z.string(),
  lines: z.array(SummaryLine),
  /** Compute normalized by size weights, in standard-hours (decimal, 3 places). */
  compute_credits: z.strictObject({ used: Decimal, included: Decimal.nullable(), billable: Decimal }),
  total: Decimal,
});
export type UsageSummary = z.infer<typeof UsageSummary>;

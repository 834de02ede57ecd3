/**
 * The usage summary, pure: period totals per meter + the terms in force → priced lines. Exact integer
 * arithmetic throughout (bigint); money is rounded half-up to cents once per line.
 *
 * Compute is normalized: a second of a size is `weight_milli` thousandths of a standard-second, and the
 * one compute price is per standard-hour. The included standard-hours are applied to the compute lines in
 * catalog size order (small, standard, large); since every credit has the same price, the order changes
 * no amount.
 */
import type { MachineSize } from '../../../shared/schemas/machine.js';
import type { Meter, SummaryLine } from '../../../shared/schemas/usage.js';
import type { CatalogVersion } from './catalog.js';
import { COMPUTE_METER, GIB } from './metering.js';

/** A "month" of storage pricing: 30 days, the same as a billing period. */
export const MONTH_SECONDS = 30n * 86_400n;
const MILLI_PER_HOUR = 3_600_000n;

/** The allowances and overage rule that price one period (the plan's, or the trial's while trialing). */
export interface SummaryTerms {
  included_compute_standard_hours: number | null;
  included_hot_storage_gb: number | null;
  /** 0: none included (every byte billable). */
  included_egress_gb: number;
  overage_allowed: boolean;
}

export type Totals = Record<Meter, bigint>;

export function emptyTotals(): Totals {
  return {
    compute_small_seconds: 0n, compute_standard_seconds: 0n, compute_large_seconds: 0n,
    hot_storage_byte_seconds: 0n, cold_storage_byte_seconds: 0n, egress_bytes: 0n,
  };
}

/** Decimal string → integer micro-units ("0.12" → 120000n). Catalog prices have at most 6 decimals. */
export function toMicros(price: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,6}))?$/.exec(price);
  if (!m) throw new Error(`bad price ${price}`);
  return BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
}

/** n / d rounded half up (n, d ≥ 0). */
export function roundDiv(n: bigint, d: bigint): bigint {
  return (2n * n + d) / (2n * d);
}

const ceilDiv = (n: bigint, d: bigint) => (n + d - 1n) / d;
const min = (a: bigint, b: bigint) => (a < b ? a : b);
const max0 = (a: bigint) => (a > 0n ? a : 0n);

/** Cents → "12.34". */
export function formatCents(c: bigint): string {
  return `${c / 100n}.${(c % 100n).toString().padStart(2, '0')}`;
}

/** Thousandths → "12.345". */
export function formatMilli(m: bigint): string {
  return `${m / 1000n}.${(m % 1000n).toString().padStart(3, '0')}`;
}

/** Milli-standard-seconds (seconds × weight_milli) used by the compute meters. */
export function computeMilliSeconds(cat: CatalogVersion, totals: Totals): bigint {
  let sum = 0n;
  for (const s of cat.sizes) sum += totals[COMPUTE_METER[s.id]] * BigInt(s.weight_milli);
  return sum;
}

export interface PricedSummary {
  lines: SummaryLine[];
  compute_credits: { used: string; included: string | null; billable: string };
  total: string;
}

export function priceSummary(cat: CatalogVersion, terms: SummaryTerms, totals: Totals, periodSeconds: bigint): PricedSummary {
  const lines: SummaryLine[] = [];
  let totalCents = 0n;
  const price = (p: string) => (terms.overage_allowed ? toMicros(p) : 0n);
  const shownPrice = (p: string) => (terms.overage_allowed ? p : '0');
  // cents = billable × priceMicros × num / den, rounded once.
  const cents = (billable: bigint, priceMicros: bigint, den: bigint) => roundDiv(billable * priceMicros, den * 10_000n);

  // Compute, in catalog size order.
  const computePrice = price(cat.prices.compute_per_standard_hour);
  let remainingMilli = terms.included_compute_standard_hours === null ? null : BigInt(terms.included_compute_standard_hours) * MILLI_PER_HOUR;
  let billableMilli = 0n;
  for (const s of cat.sizes) {
    const meter = COMPUTE_METER[s.id as MachineSize];
    const w = BigInt(s.weight_milli);
    const q = totals[meter];
    let included: bigint | null = null;
    let billable = 0n;
    if (remainingMilli !== null) {
      // Included seconds round up: a fraction of an included second is the customer's.
      included = min(q, ceilDiv(remainingMilli, w));
      remainingMilli = max0(remainingMilli - included * w);
      billable = q - included;
    }
    billableMilli += billable * w;
    const amount = cents(billable * w, computePrice, MILLI_PER_HOUR);
    totalCents += amount;
    lines.push({
      meter, unit: 'seconds', weight_milli: s.weight_milli, quantity: q.toString(), included: included?.toString() ?? null,
      billable: billable.toString(), unit_price: shownPrice(cat.prices.compute_per_standard_hour), price_unit: 'standard_hour',
      amount: formatCents(amount),
    });
  }

  const storageLine = (meter: Meter, includedGb: number | null, p: string) => {
    const q = totals[meter];
    const included = includedGb === null ? null : BigInt(includedGb) * GIB * periodSeconds;
    const billable = included === null ? 0n : max0(q - included);
    const amount = cents(billable, price(p), GIB * MONTH_SECONDS);
    totalCents += amount;
    lines.push({
      meter, unit: 'byte_seconds', weight_milli: null, quantity: q.toString(), included: included?.toString() ?? null,
      billable: billable.toString(), unit_price: shownPrice(p), price_unit: 'gb_month', amount: formatCents(amount),
    });
  };
  storageLine('hot_storage_byte_seconds', terms.included_hot_storage_gb, cat.prices.hot_storage_per_gb_month);
  storageLine('cold_storage_byte_seconds', 0, cat.prices.cold_storage_per_gb_month);

  const eq = totals.egress_bytes;
  const eIncluded = BigInt(terms.included_egress_gb) * GIB;
  const eBillable = max0(eq - eIncluded);
  const eAmount = cents(eBillable, price(cat.prices.egress_per_gb), GIB);
  totalCents += eAmount;
  lines.push({
    meter: 'egress_bytes', unit: 'bytes', weight_milli: null, quantity: eq.toString(), included: eIncluded.toString(),
    billable: eBillable.toString(), unit_price: shownPrice(cat.prices.egress_per_gb), price_unit: 'gb', amount: formatCents(eAmount),
  });

  const usedMilli = computeMilliSeconds(cat, totals);
  return {
    lines,
    compute_credits: {
      used: formatMilli(usedMilli / 3600n),
      included: terms.included_compute_standard_hours === null ? null : formatMilli(BigInt(terms.included_compute_standard_hours) * 1000n),
      billable: formatMilli(billableMilli / 3600n),
    },
    total: formatCents(totalCents),
  };
}

/** Why a trial without overage can take no more work, or null while it can. */
export type Exhaustion = { what: 'compute'; used_hours: number; included_hours: number } | { what: 'egress'; used_gb: number; included_gb: number };

export function trialExhaustion(cat: CatalogVersion, terms: SummaryTerms, totals: Totals): Exhaustion | null {
  if (terms.overage_allowed) return null;
  const usedMilli = computeMilliSeconds(cat, totals);
  if (terms.included_compute_standard_hours !== null && usedMilli >= BigInt(terms.included_compute_standard_hours) * MILLI_PER_HOUR) {
    return { what: 'compute', used_hours: Number(usedMilli / MILLI_PER_HOUR), included_hours: terms.included_compute_standard_hours };
  }
  if (totals.egress_bytes >= BigInt(terms.included_egress_gb) * GIB) {
    return { what: 'egress', used_gb: Number(totals.egress_bytes / GIB), included_gb: terms.included_egress_gb };
  }
  return null;
}

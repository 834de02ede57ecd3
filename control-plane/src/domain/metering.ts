/**
 * Metering, pure: what one interval of a machine, snapshot or template costs in each meter, split at
 * UTC hour boundaries (a usage record never straddles an hour, so hourly and daily series are exact
 * sums of records), plus the series bucketing rule. Quantities are exact integers (bigint).
 *
 * Seconds are counted on the epoch's whole-second grid: an interval [from, to) lasts
 * floor(to/1000) − floor(from/1000) seconds. Consecutive intervals therefore telescope: however often
 * the control plane flushes, a machine running from t0 to t1 is charged exactly
 * floor(t1/1000) − floor(t0/1000) seconds (no rounding drift, no double count at the seams).
 */
import type { MachineSize, MachineState } from '../../../shared/schemas/machine.js';
import { METERS, type Meter } from '../../../shared/schemas/usage.js';

export { METERS, type Meter };

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
export const WEEK_MS = 7 * DAY_MS;
/** 1 GB in every allowance and price: a binary gigabyte, like the catalog's disk sizes. */
export const GIB = 1024n ** 3n;

export const COMPUTE_METER: Record<MachineSize, Meter> = {
  small: 'compute_small_seconds',
  standard: 'compute_standard_seconds',
  large: 'compute_large_seconds',
};

/** One line a subject accrues per second while in some state: `rate` units per second. */
export interface Rate {
  meter: Meter;
  size: MachineSize | null;
  rate: bigint;
}

/** A piece of a usage record: `quantity` of `meter` within the hour starting at `hour` (ms). */
export interface Accrual {
  meter: Meter;
  size: MachineSize | null;
  hour: number;
  quantity: bigint;
}

/**
 * What a machine accrues per second in a state. Compute counts only `running` ("a stopped machine
 * costs storage and no compute"); its provisioned disk counts in every state of a live machine,
 * including `stopped` and `error` (the disk is still held) and the transient states around them.
 */
export function machineRates(state: MachineState, size: MachineSize, diskBytes: bigint): Rate[] {
  const rates: Rate[] = [];
  if (state === 'running') rates.push({ meter: COMPUTE_METER[size], size, rate: 1n });
  if (diskBytes > 0n) rates.push({ meter: 'hot_storage_byte_seconds', size, rate: diskBytes });
  return rates;
}

/** Whole seconds on the epoch grid between two instants (ms); 0 when `to` is not after `from`. */
export function gridSeconds(fromMs: number, toMs: number): bigint {
  if (toMs <= fromMs) return 0n;
  return BigInt(Math.floor(toMs / 1000) - Math.floor(fromMs / 1000));
}

export function hourOf(ms: number): number {
  return Math.floor(ms / HOUR_MS) * HOUR_MS;
}

/** The accruals of [fromMs, toMs) at the given rates, one per (rate, hour touched); zeros omitted. */
export function accrue(rates: readonly Rate[], fromMs: number, toMs: number): Accrual[] {
  const out: Accrual[] = [];
  if (toMs <= fromMs || rates.length === 0) return out;
  for (let start = fromMs; start < toMs; ) {
    const hour = hourOf(start);
    const end = Math.min(toMs, hour + HOUR_MS);
    const secs = gridSeconds(start, end);
    if (secs > 0n) for (const r of rates) if (r.rate > 0n) out.push({ meter: r.meter, size: r.size, hour, quantity: r.rate * secs });
    start = end;
  }
  return out;
}

export type BucketWidth = 'hour' | 'day';

/** The server's bucket width for a series over [start, end): hourly up to a week inclusive, daily beyond. */
export function bucketWidth(startMs: number, endMs: number): BucketWidth {
  return endMs - startMs <= WEEK_MS ? 'hour' : 'day';
}

export function bucketOf(width: BucketWidth, hourMs: number): number {
  return width === 'hour' ? hourOf(hourMs) : Math.floor(hourMs / DAY_MS) * DAY_MS;
}

/**
 * Pure metering and pricing (domain/metering.ts, domain/usage-summary.ts): hour splitting on the
 * whole-second grid, telescoping of consecutive intervals (a property over random cut points), state
 * rates, the week boundary of series buckets, and priced lines against hand-computed literals.
 */
import t from 'tap';
import { CATALOG } from '../../control-plane/src/domain/catalog.js';
import { accrue, bucketWidth, gridSeconds, machineRates } from '../../control-plane/src/domain/metering.js';
import { emptyTotals, priceSummary, roundDiv, toMicros, trialExhaustion } from '../../control-plane/src/domain/usage-summary.js';

const at = (s: string) => Date.parse(s);
const GiB = 1073741824n;

t.test('accrual splits at UTC hours on the whole-second grid', async (t) => {
  const rates = machineRates('running', 'standard', 26843545600n);
  t.same(rates, [
    { meter: 'compute_standard_seconds', size: 'standard', rate: 1n },
    { meter: 'hot_storage_byte_seconds', size: 'standard', rate: 26843545600n },
  ]);
  const acc = accrue(rates, at('2026-11-22T06:59:59.900Z'), at('2026-11-22T08:00:01.100Z'));
  t.same(acc.map((a) => [new Date(a.hour).toISOString(), a.meter, a.quantity]), [
    // 06:59:59.900 → 07:00:00: the grid second 06:59:59 is counted (floor(07:00)−floor(06:59:59.9) = 1)
    ['2026-11-22T06:00:00.000Z', 'compute_standard_seconds', 1n],
    ['2026-11-22T06:00:00.000Z', 'hot_storage_byte_seconds', 26843545600n],
    ['2026-11-22T07:00:00.000Z', 'compute_standard_seconds', 3600n],
    ['2026-11-22T07:00:00.000Z', 'hot_storage_byte_seconds', 96636764160000n],
    ['2026-11-22T08:00:00.000Z', 'compute_standard_seconds', 1n],
    ['2026-11-22T08:00:00.000Z', 'hot_storage_byte_seconds', 26843545600n],
  ]);
  t.same(machineRates('stopped', 'small', 10737418240n), [{ meter: 'hot_storage_byte_seconds', size: 'small', rate: 10737418240n }], 'stopped: storage, no compute');
  t.same(machineRates('starting', 'large', 0n), [], 'no disk, not running: nothing');
  t.equal(gridSeconds(1000, 999), 0n);
});

t.test('property: however an interval is cut, the pieces sum to the whole', async (t) => {
  const rates = machineRates('running', 'large', 53687091200n);
  for (let trial = 0; trial < 200; trial++) {
    const from = at('2026-11-01T00:00:00Z') + Math.floor(Math.random() * 86_400_000);
    const to = from + Math.floor(Math.random() * 3 * 86_400_000);
    const cuts = Array.from({ length: Math.floor(Math.random() * 20) }, () => from + Math.floor(Math.random() * (to - from))).sort((a, b) => a - b);
    const points = [from, ...cuts, to];
    let secs = 0n;
    let bytes = 0n;
    for (let i = 1; i < points.length; i++) {
      for (const a of accrue(rates, points[i - 1]!, points[i]!)) {
        if (a.meter === 'compute_large_seconds') secs += a.quantity;
        else bytes += a.quantity;
        t.ok(a.hour % 3_600_000 === 0, 'records start on an hour');
      }
    }
    const whole = BigInt(Math.floor(to / 1000) - Math.floor(from / 1000));
    if (secs !== whole || bytes !== whole * 53687091200n) {
      t.fail(`cut ${JSON.stringify(points)}: ${secs} ≠ ${whole}`);
      return;
    }
  }
  t.pass('200 random cuttings telescope exactly');
});

t.test('series bucket width: hourly up to a week inclusive, daily beyond', async (t) => {
  const s = at('2026-11-01T00:00:00Z');
  t.equal(bucketWidth(s, s + 7 * 86_400_000), 'hour');
  t.equal(bucketWidth(s, s + 7 * 86_400_000 + 1), 'day');
  t.equal(bucketWidth(s, s + 3_600_000), 'hour');
});

t.test('money helpers', async (t) => {
  t.equal(toMicros('0.12'), 120000n);
  t.equal(toMicros('449.00'), 449000000n);
  t.equal(toMicros('3'), 3000000n);
  t.equal(roundDiv(5n, 2n), 3n, 'half up');
  t.equal(roundDiv(4n, 3n), 1n);
});

t.test('priced lines: a paid plan with overage, hand-computed', async (t) => {
  const cat = CATALOG[0]!;
  const totals = emptyTotals();
  totals.compute_small_seconds = 7200n; // 1 standard-hour
  totals.compute_large_seconds = 9000n; // 5 standard-hours
  totals.hot_storage_byte_seconds = 2n * 53687091200n * 2592000n; // 100 GB for 30 days
  totals.cold_storage_byte_seconds = 10n * GiB * 2592000n; // 10 GB-months
  totals.egress_bytes = 3n * GiB + 1n;
  const p = priceSummary(cat, { included_compute_standard_hours: 3, included_hot_storage_gb: 75, included_egress_gb: 0, overage_allowed: true }, totals, 2592000n);
  t.same(p.lines, [
    // small: 1 h of credits all included; large: 2 of its 5 standard-hours included (3600 s), 5400 s billable = 3 h × 0.12
    { meter: 'compute_small_seconds', unit: 'seconds', weight_milli: 500, quantity: '7200', included: '7200', billable: '0', unit_price: '0.12', price_unit: 'standard_hour', amount: '0.00' },
    { meter: 'compute_standard_seconds', unit: 'seconds', weight_milli: 1000, quantity: '0', included: '0', billable: '0', unit_price: '0.12', price_unit: 'standard_hour', amount: '0.00' },
    { meter: 'compute_large_seconds', unit: 'seconds', weight_milli: 2000, quantity: '9000', included: '3600', billable: '5400', unit_price: '0.12', price_unit: 'standard_hour', amount: '0.36' },
    // 100 GB-months used, 75 included: 25 × 0.10
    { meter: 'hot_storage_byte_seconds', unit: 'byte_seconds', weight_milli: null, quantity: '278313880780800000', included: '208735410585600000', billable: '69578470195200000', unit_price: '0.10', price_unit: 'gb_month', amount: '2.50' },
    { meter: 'cold_storage_byte_seconds', unit: 'byte_seconds', weight_milli: null, quantity: '27831388078080000', included: '0', billable: '27831388078080000', unit_price: '0.03', price_unit: 'gb_month', amount: '0.30' },
    { meter: 'egress_bytes', unit: 'bytes', weight_milli: null, quantity: '3221225473', included: '0', billable: '3221225473', unit_price: '0.05', price_unit: 'gb', amount: '0.15' },
  ]);
  t.same(p.compute_credits, { used: '6.000', included: '3.000', billable: '3.000' });
  t.equal(p.total, '3.31');
});

t.test('a trial without overage prices to zero but keeps its lines; exhaustion', async (t) => {
  const cat = CATALOG[0]!;
  const totals = emptyTotals();
  totals.compute_standard_seconds = 201600n; // exactly 56 standard-hours
  totals.egress_bytes = 10n * GiB;
  const terms = { included_compute_standard_hours: 56, included_hot_storage_gb: 200, included_egress_gb: 50, overage_allowed: false };
  const p = priceSummary(cat, terms, totals, 1209600n);
  t.equal(p.lines.length, 6, 'every meter has a line');
  t.ok(p.lines.every((l) => l.amount === '0.00' && l.unit_price === '0'), 'zero-priced');
  t.same(p.compute_credits, { used: '56.000', included: '56.000', billable: '0.000' });
  t.same(trialExhaustion(cat, terms, totals), { what: 'compute', used_hours: 56, included_hours: 56 });
  totals.compute_standard_seconds = 201599n;
  t.equal(trialExhaustion(cat, terms, totals), null, 'one second short: still allowed');
  totals.egress_bytes = 50n * GiB;
  t.same(trialExhaustion(cat, terms, totals), { what: 'egress', used_gb: 50, included_gb: 50 });
  t.equal(trialExhaustion(cat, { ...terms, overage_allowed: true }, totals), null, 'overage allowed: never exhausted');
});

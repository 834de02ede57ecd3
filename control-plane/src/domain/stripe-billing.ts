/**
 * Stripe, as data: which account state a Stripe subscription status means, the provider events that
 * move an account there through the state table, and the units usage is reported to Stripe in.
 * Pure (no `stripe` import): the provider in billing/stripe.ts feeds it strings and totals.
 */
import type { BillingState } from '../../../shared/schemas/billing.js';
import { BILLING_TRANSITIONS, PROVIDER_EVENTS, type ProviderEvent } from './billing-account.js';
import { GIB } from './metering.js';
import type { Totals } from './usage-summary.js';

/**
 * A subscription status → the account state it means. `incomplete` (first payment pending) and
 * `paused` (a trial ended without a payment method, by the operator's Stripe settings) move nothing:
 * the account stays where it is until Stripe settles the subscription.
 */
export function stateForSubscriptionStatus(status: string): BillingState | null {
  switch (status) {
    case 'trialing':
      return 'trialing';
    case 'active':
      return 'active';
    case 'past_due':
    case 'unpaid':
      return 'past_due';
    case 'canceled':
    case 'incomplete_expired':
      return 'canceled';
    default:
      return null;
  }
}

/**
 * The shortest sequence of provider events that moves an account from `from` to `to` through the
 * state table (at most two: a subscription seen `active` before its checkout completed goes
 * unsubscribed → trialing → active). [] when already there; null when the table has no way (e.g.
 * canceled → trialing: a resubscription is never a trial), so the webhook moves nothing.
 */
export function eventsToReach(from: BillingState, to: BillingState): ProviderEvent[] | null {
  if (from === to) return [];
  const seen = new Set<BillingState>([from]);
  let frontier: { state: BillingState; path: ProviderEvent[] }[] = [{ state: from, path: [] }];
  for (let depth = 0; depth < 2; depth++) {
    const next: typeof frontier = [];
    for (const f of frontier) {
      for (const e of PROVIDER_EVENTS) {
        const s = BILLING_TRANSITIONS[e][f.state];
        if (!s || seen.has(s)) continue;
        if (s === to) return [...f.path, e];
        seen.add(s);
        next.push({ state: s, path: [...f.path, e] });
      }
    }
    frontier = next;
  }
  return null;
}

/**
 * The Stripe meters usage is reported to: the event name the operator's Stripe meter listens for, and
 * the period's cumulative quantity in that meter's whole units (what was reported is subtracted by
 * the provider; floors never make a cumulative figure go down, so a delta is never negative).
 * - compute: milli-standard-seconds (seconds × the size's weight_milli; exact, 3 600 000 = 1 standard-hour)
 * - hot / cold storage: GiB-hours (2^30 bytes held for an hour)
 * - egress: MiB (2^20 bytes)
 */
export const STRIPE_METERS = ['computer_compute', 'computer_hot_storage', 'computer_cold_storage', 'computer_egress'] as const;
export type StripeMeter = (typeof STRIPE_METERS)[number];

const GIB_HOUR = GIB * 3600n;
const MIB = 1n << 20n;

export function stripeMeterQuantities(computeMilliSeconds: bigint, t: Totals): Record<StripeMeter, bigint> {
  return {
    computer_compute: computeMilliSeconds,
    computer_hot_storage: t.hot_storage_byte_seconds / GIB_HOUR,
    computer_cold_storage: t.cold_storage_byte_seconds / GIB_HOUR,
    computer_egress: t.egress_bytes / MIB,
  };
}

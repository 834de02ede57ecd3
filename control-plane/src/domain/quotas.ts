/**
 * The quota decision, pure: given the account, the entitlements in force and a count supplied by the
 * caller, allow or describe the refusal. The service turns a refusal into a 402 `quota_exceeded`.
 */
import { QUOTA_LIMIT_KEYS, type QuotaInfo, type QuotaLimitKey } from '../../../shared/errors.js';
import type { BillingState } from '../../../shared/schemas/billing.js';
import { grantsEntitlements } from './billing-account.js';
import type { Entitlements } from './catalog.js';

export type CountedLimitKey = Exclude<QuotaLimitKey, 'subscription'>;
export const COUNTED_LIMIT_KEYS: readonly CountedLimitKey[] = QUOTA_LIMIT_KEYS.filter(
  (k): k is CountedLimitKey => k !== 'subscription',
);

export interface QuotaInput {
  state: BillingState;
  plan_id: string | null;
  /**
   * The entitlements in force, or null when the plan is negotiated and no override is in effect
   * (an enterprise account whose agreement has not started or has lapsed).
   */
  entitlements: Entitlements | null;
  key: CountedLimitKey;
  current: number;
  adding: number;
  upgrade_url: string | null;
}

export type QuotaDecision =
  | { ok: true }
  | { ok: false; reason: 'subscription' | 'no_agreement' | 'limit'; quota: QuotaInfo };

export type SubscriptionInput = Pick<QuotaInput, 'state' | 'plan_id' | 'entitlements' | 'upgrade_url'>;

/**
 * The spec's subscription rule alone: an `unsubscribed` or `canceled` account (and a negotiated plan with no
 * agreement in effect) may create or start nothing. Every counted check starts with it; the creating writes
 * that no entitlement counts (published ports, secrets, API keys, the restore's capture) ask it directly.
 */
export function decideSubscription(q: SubscriptionInput): QuotaDecision {
  const planId = q.plan_id ?? 'none';
  if (!grantsEntitlements(q.state)) {
    return { ok: false, reason: 'subscription', quota: { limit: 'subscription', current: 0, maximum: 0, plan_id: planId, upgrade_url: q.upgrade_url } };
  }
  if (!q.entitlements) {
    return { ok: false, reason: 'no_agreement', quota: { limit: 'subscription', current: 0, maximum: null, plan_id: planId, upgrade_url: q.upgrade_url } };
  }
  return { ok: true };
}

export function decideQuota(q: QuotaInput): QuotaDecision {
  const planId = q.plan_id ?? 'none';
  const current = Math.max(0, Math.floor(q.current));
  const subscription = decideSubscription(q);
  if (!subscription.ok || !q.entitlements) return subscription;
  const maximum = q.entitlements[q.key];
  // null inside an agreement's entitlements is still "negotiated", not unlimited: an override must name it.
  if (maximum === null || current + q.adding > maximum) {
    return { ok: false, reason: 'limit', quota: { limit: q.key, current, maximum, plan_id: planId, upgrade_url: q.upgrade_url } };
  }
  return { ok: true };
}

/** The `limit` shown in `GET /v1/billing` for one key: 0 when the account grants nothing. */
export function shownLimit(state: BillingState, entitlements: Entitlements | null, key: CountedLimitKey): number | null {
  if (!grantsEntitlements(state)) return 0;
  return entitlements ? entitlements[key] : null;
}

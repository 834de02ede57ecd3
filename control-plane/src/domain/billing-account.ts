/**
 * Billing account state machine, as data. Every state but `unsubscribed` comes from the billing
 * provider: the API never moves an account by itself, it applies provider events through this table.
 */
import type { BillingState } from '../../../shared/schemas/billing.js';

export const PROVIDER_EVENTS = [
  'checkout.completed',
  'trial.converted',
  'trial.payment_failed',
  'payment.failed',
  'payment.succeeded',
  'subscription.canceled',
] as const;
export type ProviderEvent = (typeof PROVIDER_EVENTS)[number];

/** event → (from state → to state). A missing entry is an illegal move. */
export const BILLING_TRANSITIONS: Readonly<Record<ProviderEvent, Partial<Record<BillingState, BillingState>>>> = {
  'checkout.completed': { unsubscribed: 'trialing', canceled: 'active' },
  'trial.converted': { trialing: 'active' },
  'trial.payment_failed': { trialing: 'past_due' },
  'payment.failed': { active: 'past_due' },
  'payment.succeeded': { past_due: 'active' },
  'subscription.canceled': { trialing: 'canceled', active: 'canceled', past_due: 'canceled' },
};

export function nextBillingState(from: BillingState, event: ProviderEvent): BillingState | null {
  return BILLING_TRANSITIONS[event][from] ?? null;
}

/** States in which the plan's entitlements apply. `past_due` keeps the plan. */
export function grantsEntitlements(state: BillingState): boolean {
  return state === 'trialing' || state === 'active' || state === 'past_due';
}

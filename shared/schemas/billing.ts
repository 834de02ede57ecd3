import { z } from 'zod';

export const BillingState = z.enum(['unsubscribed', 'trialing', 'active', 'past_due', 'canceled']);
export type BillingState = z.infer<typeof BillingState>;

export const PlanId = z.string().min(1).max(64).regex(/^[a-z0-9_-]+$/, 'plan ids are lowercase letters, digits, _ and -');

const HttpUrl = z
  .string()
  .max(2048)
  .pipe(z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }));

export const CheckoutRequest = z.strictObject({
  plan_id: PlanId,
  /** Where the browser lands after checkout; must be on a recognised origin (no open redirects). */
  success_url: HttpUrl,
});
export type CheckoutRequest = z.infer<typeof CheckoutRequest>;

export const PortalRequest = z.strictObject({
  return_url: HttpUrl.optional(),
});
export type PortalRequest = z.infer<typeof PortalRequest>;

/** A Stripe event as delivered to the webhook (only the envelope is described; Stripe defines the rest). */
export const StripeWebhookEvent = z.looseObject({ id: z.string(), object: z.literal('event'), type: z.string(), created: z.number().int() });

/** The webhook's answer: `duplicate` for an event id applied before, `stale` for an out-of-date one. */
export const StripeWebhookAnswer = z.object({
  received: z.literal(true),
  id: z.string(),
  outcome: z.enum(['applied', 'unchanged', 'ignored', 'stale', 'duplicate']),
});

import { StripeWebhookAnswer, StripeWebhookEvent } from '../../../../../shared/schemas/billing.js';
import { defineOp } from '../../op.js';
import { ERRORS } from '../../../errors.js';

/**
 * Stripe's webhook endpoint (BILLING_PROVIDER=stripe). No credential: the Stripe-Signature header,
 * verified over the raw body with the signing secret, is the credential. Each event id is applied once.
 */
export default defineOp({
  name: 'billing.stripe_webhook',
  method: 'post',
  path: '/billing/stripe/webhook',
  summary: 'Stripe webhook (signed; BILLING_PROVIDER=stripe only)',
  auth: 'none',
  // Declared for the reference; the handler verifies the signature over the raw bytes before parsing anything.
  body: StripeWebhookEvent,
  responses: { 200: StripeWebhookAnswer },
  async handler(c, s) {
    if (!s.stripe) throw ERRORS.stripeBillingNotInUse();
    const raw = await c.req.text();
    const r = await s.stripe.handleWebhook(raw, c.req.header('stripe-signature'));
    return c.json({ received: true as const, id: r.id, outcome: r.outcome });
  },
});

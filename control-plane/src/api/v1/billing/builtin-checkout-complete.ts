import { defineOp } from '../../op.js';
import { ERRORS } from '../../../errors.js';

/**
 * The built-in provider's checkout page: a plain GET, as a browser follows a link. The unguessable
 * one-time token is the only credential; redeeming it starts the trial and sends the browser on.
 */
export default defineOp({
  name: 'billing.builtin.checkout_complete',
  method: 'get',
  path: '/billing/checkout/:token/complete',
  auth: 'none',
  responses: { 303: 'redirect' },
  async handler(c, s) {
    if (!s.builtin) throw ERRORS.builtinBillingNotInUse();
    const r = await s.builtin.completeCheckout(c.req.param('token'));
    if (!r) throw ERRORS.unknownCheckoutLink();
    c.header('cache-control', 'no-store');
    c.header('referrer-policy', 'no-referrer');
    return c.redirect(r.successUrl, 303);
  },
});

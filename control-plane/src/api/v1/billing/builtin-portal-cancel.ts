import { defineOp } from '../../op.js';
import { ERRORS } from '../../../errors.js';

/** The portal's cancel button: the link token is the credential, as with a hosted provider's portal. */
export default defineOp({
  name: 'billing.builtin.portal_cancel',
  method: 'post',
  path: '/billing/portal/:token/cancel',
  auth: 'none',
  responses: { 303: 'redirect' },
  async handler(c, s) {
    if (!s.builtin) throw ERRORS.builtinBillingNotInUse();
    const token = c.req.param('token');
    const link = await s.builtin.portalLink(token);
    if (!link) throw ERRORS.unknownPortalLink();
    await s.builtin.emit(link.org_id, 'subscription.canceled');
    return c.redirect(`${s.config.publicBaseUrl}/v1/billing/portal/${token}`, 303);
  },
});

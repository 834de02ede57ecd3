import { AppError } from '../../../../../shared/errors.js';
import { defineOp } from '../../op.js';

/** The portal's cancel button: the link token is the credential, as with a hosted provider's portal. */
export default defineOp({
  name: 'billing.builtin.portal_cancel',
  method: 'post',
  path: '/billing/portal/:token/cancel',
  auth: 'none',
  responses: { 303: 'redirect' },
  handler(c, s) {
    if (!s.builtin) throw new AppError('unsupported_operation', 'The built-in billing provider is not in use.');
    const token = c.req.param('token');
    const link = s.builtin.portalLink(token);
    if (!link) throw new AppError('not_found', 'This portal link is unknown or expired.');
    s.builtin.emit(link.org_id, 'subscription.canceled');
    return c.redirect(`${s.config.publicBaseUrl}/v1/billing/portal/${token}`, 303);
  },
});

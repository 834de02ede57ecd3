import { CheckoutRequest } from '../../../../../shared/schemas/billing.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'billing.checkout',
  method: 'post',
  path: '/billing/checkout',
  auth: 'any',
  permission: 'billing:manage',
  async handler(c, s) {
    const body = await jsonBody(c, CheckoutRequest);
    c.header('cache-control', 'no-store');
    return c.json(await s.billing.checkout(c.get('principal').org_id!, body));
  },
});

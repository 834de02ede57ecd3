import { CheckoutRequest } from '../../../../../shared/schemas/billing.js';
import { ProviderLink } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'billing.checkout',
  method: 'post',
  path: '/billing/checkout',
  auth: 'any',
  permission: 'billing:manage',
  body: CheckoutRequest,
  responses: { 200: ProviderLink },
  async handler(c, s, io) {
    const body = await io.body();
    c.header('cache-control', 'no-store');
    return c.json(await s.billing.checkout(c.get('orgPrincipal').org_id, body));
  },
});

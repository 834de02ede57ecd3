import { PortalRequest } from '../../../../../shared/schemas/billing.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'billing.portal',
  method: 'post',
  path: '/billing/portal',
  auth: 'any',
  permission: 'billing:manage',
  async handler(c, s) {
    const body = await jsonBody(c, PortalRequest);
    c.header('cache-control', 'no-store');
    return c.json(await s.billing.portal(c.get('principal').org_id!, body.return_url ?? null));
  },
});

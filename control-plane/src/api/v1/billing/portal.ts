import { PortalRequest } from '../../../../../shared/schemas/billing.js';
import { ProviderLink } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'billing.portal',
  method: 'post',
  path: '/billing/portal',
  auth: 'any',
  permission: 'billing:manage',
  body: PortalRequest,
  responses: { 200: ProviderLink },
  async handler(c, s, io) {
    const body = await io.body();
    c.header('cache-control', 'no-store');
    return c.json(await s.billing.portal(c.get('orgPrincipal').org_id, body.return_url ?? null));
  },
});

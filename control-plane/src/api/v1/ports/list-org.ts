import { PortListQuery } from '../../../../../shared/schemas/ports.js';
import { PreviewPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

/** Every published port of the organization, across its machines. */
export default defineOp({
  name: 'ports.list_org',
  method: 'get',
  path: '/ports',
  auth: 'any',
  query: PortListQuery,
  responses: { 200: PreviewPage },
  handler: async (c, s, io) => c.json(await s.ports.listOrg(c.get('orgPrincipal').org_id, io.query())),
});

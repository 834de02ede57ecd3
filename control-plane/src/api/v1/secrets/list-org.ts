import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { OrgSecretPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

/** Every secret name in the organization, with the machine it belongs to; paged like every list. */
export default defineOp({
  name: 'secrets.list_org',
  method: 'get',
  path: '/secrets',
  auth: 'any',
  query: PageQuery,
  responses: { 200: OrgSecretPage },
  handler: async (c, s, io) => c.json(await s.secrets.listOrg(c.get('orgPrincipal').org_id, io.query())),
});

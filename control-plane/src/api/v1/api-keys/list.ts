import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { ApiKeyPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'api_keys.list',
  method: 'get',
  path: '/api-keys',
  auth: 'any',
  query: PageQuery,
  responses: { 200: ApiKeyPage },
  handler: async (c, s, io) => c.json(await s.orgs.listApiKeys(c.get('orgPrincipal'), io.query())),
});

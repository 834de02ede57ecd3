import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'api_keys.list',
  method: 'get',
  path: '/api-keys',
  auth: 'any',
  handler: (c, s) => c.json(s.orgs.listApiKeys(c.get('principal'), queryOf(c, PageQuery))),
});

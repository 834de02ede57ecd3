import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

/** Every secret name in the organization, with the machine it belongs to; paged like every list. */
export default defineOp({
  name: 'secrets.list_org',
  method: 'get',
  path: '/secrets',
  auth: 'any',
  handler: (c, s) => c.json(s.secrets.listOrg(c.get('principal').org_id!, queryOf(c, PageQuery))),
});

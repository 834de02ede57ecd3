import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'members.list',
  method: 'get',
  path: '/members',
  auth: 'any',
  handler: (c, s) => c.json(s.orgs.listMembers(c.get('principal'), queryOf(c, PageQuery))),
});

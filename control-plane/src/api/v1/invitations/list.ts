import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'invitations.list',
  method: 'get',
  path: '/invitations',
  auth: 'any',
  handler: (c, s) => c.json(s.orgs.listInvitations(c.get('principal'), queryOf(c, PageQuery))),
});

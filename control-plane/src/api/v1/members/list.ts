import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { MemberPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'members.list',
  method: 'get',
  path: '/members',
  auth: 'any',
  query: PageQuery,
  responses: { 200: MemberPage },
  handler: async (c, s, io) => c.json(await s.orgs.listMembers(c.get('orgPrincipal'), io.query())),
});

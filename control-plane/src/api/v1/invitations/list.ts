import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { InvitationPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'invitations.list',
  method: 'get',
  path: '/invitations',
  auth: 'any',
  query: PageQuery,
  responses: { 200: InvitationPage },
  handler: async (c, s, io) => c.json(await s.orgs.listInvitations(c.get('orgPrincipal'), io.query())),
});

import { Invitation } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'invitations.revoke',
  method: 'delete',
  path: '/invitations/:invitation_id',
  auth: 'any',
  permission: 'members:manage',
  responses: { 200: Invitation },
  handler: async (c, s) => c.json(await s.orgs.revokeInvitation(c.get('orgPrincipal'), c.req.param('invitation_id'))),
});

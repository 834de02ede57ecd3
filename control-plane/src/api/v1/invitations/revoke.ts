import { Invitation } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'invitations.revoke',
  method: 'delete',
  path: '/invitations/:invitation_id',
  auth: 'any',
  permission: 'members:manage',
  responses: { 200: Invitation },
  handler: (c, s) => c.json(s.orgs.revokeInvitation(c.get('orgPrincipal'), c.req.param('invitation_id'))),
});

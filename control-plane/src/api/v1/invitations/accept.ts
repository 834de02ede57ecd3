import { AcceptInvitationRequest } from '../../../../../shared/schemas/org.js';
import { AcceptedInvitation } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

/** Not organization-scoped: the invitee is not a member of the inviting organization yet. */
export default defineOp({
  name: 'invitations.accept',
  method: 'post',
  path: '/invitations/accept',
  auth: 'session',
  org: false,
  body: AcceptInvitationRequest,
  responses: { 200: AcceptedInvitation },
  async handler(c, s, io) {
    const body = await io.body();
    return c.json(await s.orgs.acceptInvitation(c.get('principal'), body.token));
  },
});

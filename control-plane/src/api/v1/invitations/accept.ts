import { AcceptInvitationRequest } from '../../../../../shared/schemas/org.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

/** Not organization-scoped: the invitee is not a member of the inviting organization yet. */
export default defineOp({
  name: 'invitations.accept',
  method: 'post',
  path: '/invitations/accept',
  auth: 'session',
  org: false,
  async handler(c, s) {
    const body = await jsonBody(c, AcceptInvitationRequest);
    return c.json(s.orgs.acceptInvitation(c.get('principal'), body.token));
  },
});

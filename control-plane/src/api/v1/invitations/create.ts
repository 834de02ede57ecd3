import { CreateInvitationRequest } from '../../../../../shared/schemas/org.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

/** The response's `token` is shown once; delivering it to the invitee is the inviter's (or a mailer's) job. */
export default defineOp({
  name: 'invitations.create',
  method: 'post',
  path: '/invitations',
  auth: 'any',
  permission: 'members:manage',
  async handler(c, s) {
    const body = await jsonBody(c, CreateInvitationRequest);
    c.header('cache-control', 'no-store');
    return c.json(s.orgs.createInvitation(c.get('principal'), body), 201);
  },
});

import { CreateInvitationRequest } from '../../../../../shared/schemas/org.js';
import { CreatedInvitation } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

/** The response's `token` is shown once; delivering it to the invitee is the inviter's (or a mailer's) job. */
export default defineOp({
  name: 'invitations.create',
  method: 'post',
  path: '/invitations',
  auth: 'any',
  permission: 'members:manage',
  body: CreateInvitationRequest,
  responses: { 201: CreatedInvitation },
  async handler(c, s, io) {
    const body = await io.body();
    c.header('cache-control', 'no-store');
    return c.json(await s.orgs.createInvitation(c.get('orgPrincipal'), body), 201);
  },
});

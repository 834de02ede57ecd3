import { UpdateMemberRequest } from '../../../../../shared/schemas/org.js';
import { Member } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'members.update',
  method: 'patch',
  path: '/members/:membership_id',
  auth: 'any',
  permission: 'members:manage',
  body: UpdateMemberRequest,
  responses: { 200: Member },
  async handler(c, s, io) {
    const body = await io.body();
    return c.json(await s.orgs.changeRole(c.get('orgPrincipal'), c.req.param('membership_id'), body.role));
  },
});

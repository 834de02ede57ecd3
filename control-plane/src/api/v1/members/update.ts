import { UpdateMemberRequest } from '../../../../../shared/schemas/org.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'members.update',
  method: 'patch',
  path: '/members/:membership_id',
  auth: 'any',
  permission: 'members:manage',
  async handler(c, s) {
    const body = await jsonBody(c, UpdateMemberRequest);
    return c.json(s.orgs.changeRole(c.get('principal'), c.req.param('membership_id')!, body.role));
  },
});

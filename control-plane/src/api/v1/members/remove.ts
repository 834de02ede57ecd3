import { defineOp } from '../../op.js';

/** Needs members:manage, except that a signed-in user may remove their own membership (leave). */
export default defineOp({
  name: 'members.remove',
  method: 'delete',
  path: '/members/:membership_id',
  auth: 'any',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.orgs.removeMember(c.get('orgPrincipal'), c.req.param('membership_id'));
    return c.body(null, 204);
  },
});

import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.sessions.revoke',
  method: 'delete',
  path: '/auth/sessions/:auth_session_id',
  auth: 'session',
  org: false,
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.identity.revokeSession(c.get('principal').user_id, c.req.param('auth_session_id'));
    return c.body(null, 204);
  },
});

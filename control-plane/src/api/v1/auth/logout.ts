import { clearedSessionCookie } from '../../../auth/cookies.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.logout',
  method: 'post',
  path: '/auth/logout',
  auth: 'session',
  org: false,
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.identity.logout(c.get('principal').auth_session_id!);
    c.header('set-cookie', clearedSessionCookie(s.config.secureCookies));
    return c.body(null, 204);
  },
});

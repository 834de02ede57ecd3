import { LoginRequest } from '../../../../../shared/schemas/auth.js';
import { sessionCookie } from '../../../auth/cookies.js';
import { clientIp } from '../../middleware/client-ip.js';
import { AuthResult } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.login',
  method: 'post',
  path: '/auth/login',
  auth: 'none',
  body: LoginRequest,
  responses: { 200: AuthResult },
  async handler(c, s, io) {
    const body = await io.body();
    const r = await s.identity.login(body, clientIp(c, s.config.trustProxy));
    c.header('set-cookie', sessionCookie(r.token, s.config.secureCookies));
    c.header('cache-control', 'no-store');
    return c.json({ user_id: r.userId, organization_id: r.session.active_org_id, auth_session_id: r.session.id, expires_at: r.session.expires_at });
  },
});

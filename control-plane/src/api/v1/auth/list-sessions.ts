import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { AuthSessionPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.sessions.list',
  method: 'get',
  path: '/auth/sessions',
  auth: 'session',
  org: false,
  query: PageQuery,
  responses: { 200: AuthSessionPage },
  async handler(c, s, io) {
    const p = c.get('principal');
    return c.json(await s.identity.listSessions(p.user_id, p.auth_session_id, io.query()));
  },
});

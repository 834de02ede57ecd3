import { PageQuery } from '../../../../../shared/schemas/pagination.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.sessions.list',
  method: 'get',
  path: '/auth/sessions',
  auth: 'session',
  org: false,
  handler(c, s) {
    const p = c.get('principal');
    return c.json(s.identity.listSessions(p.user_id, p.auth_session_id, queryOf(c, PageQuery)));
  },
});

import { SessionListQuery } from '../../../../../shared/schemas/session.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'sessions.list',
  method: 'get',
  path: '/sessions',
  auth: 'any',
  handler: (c, s) => c.json(s.sessions.list(c.get('principal').org_id!, queryOf(c, SessionListQuery))),
});

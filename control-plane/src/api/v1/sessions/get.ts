import { Session } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'sessions.get',
  method: 'get',
  path: '/sessions/:session_id',
  auth: 'any',
  responses: { 200: Session },
  handler: async (c, s) => c.json(await s.sessions.get(c.get('orgPrincipal').org_id, c.req.param('session_id'))),
});

import { SessionListQuery } from '../../../../../shared/schemas/session.js';
import { SessionPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'sessions.list',
  method: 'get',
  path: '/sessions',
  auth: 'any',
  query: SessionListQuery,
  responses: { 200: SessionPage },
  handler: async (c, s, io) => c.json(await s.sessions.list(c.get('orgPrincipal').org_id, io.query())),
});

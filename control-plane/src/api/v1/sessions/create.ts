import { CreateSessionRequest } from '../../../../../shared/schemas/session.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

/** Needs only membership (people) or the sessions:write scope (keys): opening a session is not control. */
export default defineOp({
  name: 'sessions.create',
  method: 'post',
  path: '/sessions',
  auth: 'any',
  async handler(c, s) {
    const body = await jsonBody(c, CreateSessionRequest);
    return c.json(s.sessions.open(c.get('principal'), body), 201);
  },
});

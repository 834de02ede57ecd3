import { CreateSessionRequest } from '../../../../../shared/schemas/session.js';
import { Session } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

/** Needs only membership (people) or the sessions:write scope (keys): opening a session is not control. */
export default defineOp({
  name: 'sessions.create',
  method: 'post',
  path: '/sessions',
  auth: 'any',
  body: CreateSessionRequest,
  responses: { 201: Session },
  async handler(c, s, io) {
    const body = await io.body();
    return c.json(await s.sessions.open(c.get('orgPrincipal'), body), 201);
  },
});

import { defineOp } from '../../op.js';

/** Closes the session (and releases its input lease). */
export default defineOp({
  name: 'sessions.delete',
  method: 'delete',
  path: '/sessions/:session_id',
  auth: 'any',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.sessions.close(c.get('orgPrincipal'), c.req.param('session_id'));
    return c.body(null, 204);
  },
});

import { Me } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.me',
  method: 'get',
  path: '/auth/me',
  auth: 'any',
  org: false,
  responses: { 200: Me },
  handler: async (c, s) => c.json(await s.identity.me(c.get('principal'))),
});

import { defineOp } from '../../op.js';

export default defineOp({
  name: 'api_keys.revoke',
  method: 'delete',
  path: '/api-keys/:api_key_id',
  auth: 'any',
  permission: 'api_keys:manage',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.orgs.revokeApiKey(c.get('orgPrincipal'), c.req.param('api_key_id'));
    return c.body(null, 204);
  },
});

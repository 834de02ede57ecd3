import { CreateApiKeyRequest } from '../../../../../shared/schemas/org.js';
import { CreatedApiKey } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

/** The only response that ever carries the key's secret. */
export default defineOp({
  name: 'api_keys.create',
  method: 'post',
  path: '/api-keys',
  auth: 'any',
  permission: 'api_keys:manage',
  body: CreateApiKeyRequest,
  responses: { 201: CreatedApiKey },
  async handler(c, s, io) {
    const body = await io.body();
    c.header('cache-control', 'no-store');
    return c.json(await s.orgs.createApiKey(c.get('orgPrincipal'), body), 201);
  },
});

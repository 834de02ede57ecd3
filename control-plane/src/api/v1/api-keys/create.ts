import { CreateApiKeyRequest } from '../../../../../shared/schemas/org.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

/** The only response that ever carries the key's secret. */
export default defineOp({
  name: 'api_keys.create',
  method: 'post',
  path: '/api-keys',
  auth: 'any',
  permission: 'api_keys:manage',
  async handler(c, s) {
    const body = await jsonBody(c, CreateApiKeyRequest);
    c.header('cache-control', 'no-store');
    return c.json(s.orgs.createApiKey(c.get('principal'), body), 201);
  },
});

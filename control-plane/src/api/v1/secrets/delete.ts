import { SecretName } from '../../../../../shared/schemas/secrets.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';
import { ERRORS } from '../../../errors.js';

/** Revoke one secret: gone from storage at once, and from the running machine (docs/api-secrets.md). */
export default defineOp({
  name: 'secrets.delete',
  method: 'delete',
  path: '/machines/:machine_id/secrets/:name',
  auth: 'any',
  permission: 'secrets:write',
  responses: { 204: 'empty' },
  async handler(c, s) {
    const machineId = machineIdParam(c);
    const name = c.req.param('name');
    // A name that cannot be stored cannot exist.
    if (!SecretName.safeParse(name).success) throw ERRORS.noSuchSecret();
    await s.secrets.remove(c.get('orgPrincipal'), machineId, name);
    return c.body(null, 204);
  },
});

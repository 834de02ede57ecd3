import { SecretPut } from '../../../../../shared/schemas/secrets.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/**
 * Store or replace one secret (version bumps). Answers the record, never the value, once the value is
 * stored; on a running machine after one delivery attempt (`delivered_at` says whether it arrived).
 */
export default defineOp({
  name: 'secrets.put',
  method: 'put',
  path: '/machines/:machine_id/secrets',
  auth: 'any',
  permission: 'secrets:write',
  async handler(c, s) {
    const p = c.get('principal');
    const machineId = machineIdParam(c);
    s.secrets.checkStorable(p.org_id!, machineId);
    const body = await jsonBody(c, SecretPut);
    return c.json(await s.secrets.put(p, machineId, body));
  },
});

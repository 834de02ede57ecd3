import { Secret, SecretPut } from '../../../../../shared/schemas/secrets.js';
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
  body: SecretPut,
  responses: { 200: Secret },
  async handler(c, s, io) {
    const p = c.get('orgPrincipal');
    const machineId = machineIdParam(c);
    await s.secrets.checkStorable(p.org_id, machineId);
    const body = await io.body();
    return c.json(await s.secrets.put(p, machineId, body));
  },
});

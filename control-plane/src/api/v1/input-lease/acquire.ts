import { LeaseRequest } from '../../../../../shared/schemas/machine.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** Acquire or renew; 200 with the fence either way (`renewed` tells which). */
export default defineOp({
  name: 'input_lease.acquire',
  method: 'post',
  path: '/machines/:machine_id/input-lease',
  auth: 'any',
  permission: 'machines:control',
  async handler(c, s) {
    const id = machineIdParam(c);
    const body = await jsonBody(c, LeaseRequest);
    return c.json(s.leases.acquire(c.get('principal'), id, body));
  },
});

import { LeaseRequest } from '../../../../../shared/schemas/machine.js';
import { LeaseGrant } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** Acquire or renew; 200 with the fence either way (`renewed` tells which). */
export default defineOp({
  name: 'input_lease.acquire',
  method: 'post',
  path: '/machines/:machine_id/input-lease',
  auth: 'any',
  permission: 'machines:control',
  body: LeaseRequest,
  responses: { 200: LeaseGrant },
  async handler(c, s, io) {
    const id = machineIdParam(c);
    const body = await io.body();
    return c.json(await s.leases.acquire(c.get('orgPrincipal'), id, body));
  },
});

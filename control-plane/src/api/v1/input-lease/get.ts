import { LeaseState } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

export default defineOp({
  name: 'input_lease.get',
  method: 'get',
  path: '/machines/:machine_id/input-lease',
  auth: 'any',
  // Read from the store alone: served wherever it arrives, also while the machine's host is down (api/op.ts `owner`).
  owner: 'any',
  responses: { 200: LeaseState },
  handler: async (c, s) => c.json(await s.leases.get(c.get('orgPrincipal').org_id, machineIdParam(c))),
});

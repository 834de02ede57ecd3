import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

export default defineOp({
  name: 'machines.get',
  method: 'get',
  path: '/machines/:machine_id',
  auth: 'any',
  // Read from the store alone: served wherever it arrives, also while the machine's host is down (api/op.ts `owner`).
  owner: 'any',
  responses: { 200: Machine },
  handler: async (c, s) => c.json(await s.machines.get(c.get('orgPrincipal').org_id, machineIdParam(c))),
});

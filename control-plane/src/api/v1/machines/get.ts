import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

export default defineOp({
  name: 'machines.get',
  method: 'get',
  path: '/machines/:machine_id',
  auth: 'any',
  responses: { 200: Machine },
  handler: async (c, s) => c.json(await s.machines.get(c.get('orgPrincipal').org_id, machineIdParam(c))),
});

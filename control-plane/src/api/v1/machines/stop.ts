import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Answers once the transition has completed, with the machine as it then is. */
export default defineOp({
  name: 'machines.stop',
  method: 'post',
  path: '/machines/:machine_id/stop',
  auth: 'any',
  permission: 'machines:control',
  responses: { 200: Machine },
  handler: async (c, s) => c.json(await s.machines.stop(c.get('orgPrincipal'), machineIdParam(c))),
});

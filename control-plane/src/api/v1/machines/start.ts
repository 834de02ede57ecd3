import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Answers once the transition has completed, with the machine as it then is. */
export default defineOp({
  name: 'machines.start',
  method: 'post',
  path: '/machines/:machine_id/start',
  auth: 'any',
  // Its host down: answered where it arrives, with the cause (409 machineOnLostHost, services/machines/lifecycle.ts)
  // instead of a 503 to retry forever; its fence keeps this process from acting on another host's machine.
  onLostHost: 'serve_here',
  permission: 'machines:control',
  responses: { 200: Machine },
  handler: async (c, s) => c.json(await s.machines.start(c.get('orgPrincipal'), machineIdParam(c))),
});

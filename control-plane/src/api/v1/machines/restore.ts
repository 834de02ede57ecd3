import { RestoreMachineRequest } from '../../../../../shared/schemas/snapshot.js';
import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Answers once the restore has completed: running again, or stopped with the restored disk. */
export default defineOp({
  name: 'machines.restore',
  method: 'post',
  path: '/machines/:machine_id/restore',
  auth: 'any',
  permission: 'machines:control',
  body: RestoreMachineRequest,
  responses: { 200: Machine },
  async handler(c, s, io) {
    const id = machineIdParam(c);
    const body = await io.body();
    return c.json(await s.machines.restore(c.get('orgPrincipal'), id, body));
  },
});

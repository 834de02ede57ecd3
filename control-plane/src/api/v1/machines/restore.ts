import { RestoreMachineRequest } from '../../../../../shared/schemas/snapshot.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Answers once the restore has completed: running again, or stopped with the restored disk. */
export default defineOp({
  name: 'machines.restore',
  method: 'post',
  path: '/machines/:machine_id/restore',
  auth: 'any',
  permission: 'machines:control',
  async handler(c, s) {
    const id = machineIdParam(c);
    const body = await jsonBody(c, RestoreMachineRequest);
    return c.json(await s.machines.restore(c.get('principal'), id, body));
  },
});

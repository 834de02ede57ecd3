import { UpdateMachineRequest } from '../../../../../shared/schemas/machine.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Renaming and metadata are management of the machine, not input: machines:control. */
export default defineOp({
  name: 'machines.update',
  method: 'patch',
  path: '/machines/:machine_id',
  auth: 'any',
  permission: 'machines:control',
  async handler(c, s) {
    const id = machineIdParam(c);
    const body = await jsonBody(c, UpdateMachineRequest);
    return c.json(s.machines.update(c.get('principal'), id, body));
  },
});

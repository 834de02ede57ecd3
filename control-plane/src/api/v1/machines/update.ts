import { Machine, UpdateMachineRequest } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Renaming and metadata are management of the machine, not input: machines:control. */
export default defineOp({
  name: 'machines.update',
  method: 'patch',
  path: '/machines/:machine_id',
  auth: 'any',
  permission: 'machines:control',
  body: UpdateMachineRequest,
  responses: { 200: Machine },
  async handler(c, s, io) {
    const id = machineIdParam(c);
    const body = await io.body();
    return c.json(await s.machines.update(c.get('orgPrincipal'), id, body));
  },
});

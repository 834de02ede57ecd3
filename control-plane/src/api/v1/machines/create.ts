import { CreateMachineRequest } from '../../../../../shared/schemas/machine.js';
import { jsonBody } from '../../body.js';
import { defineOp } from '../../op.js';

/** Answers once the machine is running (the desktop may not answer yet), or stopped with start:false. */
export default defineOp({
  name: 'machines.create',
  method: 'post',
  path: '/machines',
  auth: 'any',
  permission: 'machines:create',
  async handler(c, s) {
    const body = await jsonBody(c, CreateMachineRequest);
    return c.json(await s.machines.create(c.get('principal'), body), 201);
  },
});

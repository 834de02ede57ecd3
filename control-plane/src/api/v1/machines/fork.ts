import { ForkMachineRequest } from '../../../../../shared/schemas/snapshot.js';
import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Answers with the new machine once it is running, like create. */
export default defineOp({
  name: 'machines.fork',
  method: 'post',
  path: '/machines/:machine_id/fork',
  auth: 'any',
  permission: 'machines:create',
  body: ForkMachineRequest,
  responses: { 201: Machine },
  async handler(c, s, io) {
    const id = machineIdParam(c);
    const body = await io.body();
    return c.json(await s.machines.fork(c.get('orgPrincipal'), id, body), 201);
  },
});

import { MachineListQuery } from '../../../../../shared/schemas/machine.js';
import { MachinePage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'machines.list',
  method: 'get',
  path: '/machines',
  auth: 'any',
  query: MachineListQuery,
  responses: { 200: MachinePage },
  handler: async (c, s, io) => c.json(await s.machines.list(c.get('orgPrincipal').org_id, io.query())),
});

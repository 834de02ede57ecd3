import { MachineListQuery } from '../../../../../shared/schemas/machine.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'machines.list',
  method: 'get',
  path: '/machines',
  auth: 'any',
  handler: (c, s) => c.json(s.machines.list(c.get('principal').org_id!, queryOf(c, MachineListQuery))),
});

import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

export default defineOp({
  name: 'machines.get',
  method: 'get',
  path: '/machines/:machine_id',
  auth: 'any',
  handler: (c, s) => c.json(s.machines.get(c.get('principal').org_id!, machineIdParam(c))),
});

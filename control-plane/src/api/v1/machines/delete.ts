import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

export default defineOp({
  name: 'machines.delete',
  method: 'delete',
  path: '/machines/:machine_id',
  auth: 'any',
  permission: 'machines:delete',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.machines.remove(c.get('orgPrincipal'), machineIdParam(c));
    return c.body(null, 204);
  },
});

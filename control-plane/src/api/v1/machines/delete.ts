import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

export default defineOp({
  name: 'machines.delete',
  method: 'delete',
  path: '/machines/:machine_id',
  auth: 'any',
  // Its host down: deleted where it arrives, the disk left to the host's return (docs/operations.md, "Losing a host").
  onLostHost: 'serve_here',
  permission: 'machines:delete',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.machines.remove(c.get('orgPrincipal'), machineIdParam(c));
    return c.body(null, 204);
  },
});

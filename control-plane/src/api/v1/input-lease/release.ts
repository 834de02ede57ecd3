import { LeaseReleaseQuery } from '../../../../../shared/schemas/session.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** 204 whether or not a lease was held; with `session_id`, only that holder's lease is released. */
export default defineOp({
  name: 'input_lease.release',
  method: 'delete',
  path: '/machines/:machine_id/input-lease',
  auth: 'any',
  permission: 'machines:control',
  query: LeaseReleaseQuery,
  responses: { 204: 'empty' },
  async handler(c, s, io) {
    const id = machineIdParam(c);
    const q = io.query();
    await s.leases.release(c.get('orgPrincipal'), id, q.session_id ?? null);
    return c.body(null, 204);
  },
});

import { defineOp } from '../../op.js';

/** Only the newest snapshot of its machine; otherwise 409 naming the snapshot in the way. */
export default defineOp({
  name: 'snapshots.delete',
  method: 'delete',
  path: '/snapshots/:snapshot_id',
  auth: 'any',
  permission: 'snapshots:delete',
  // Acts on the host's substrate without naming a machine: the driver of the host placement picks serves it.
  owner: 'host',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.snapshots.remove(c.get('orgPrincipal'), c.req.param('snapshot_id'));
    return c.body(null, 204);
  },
});

import { defineOp } from '../../op.js';

export default defineOp({
  name: 'snapshots.get',
  method: 'get',
  path: '/snapshots/:snapshot_id',
  auth: 'any',
  handler: (c, s) => c.json(s.snapshots.get(c.get('principal').org_id!, c.req.param('snapshot_id') ?? '')),
});

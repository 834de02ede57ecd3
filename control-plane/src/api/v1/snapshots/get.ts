import { Snapshot } from '../../../../../shared/schemas/snapshot.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'snapshots.get',
  method: 'get',
  path: '/snapshots/:snapshot_id',
  auth: 'any',
  responses: { 200: Snapshot },
  handler: async (c, s) => c.json(await s.snapshots.get(c.get('orgPrincipal').org_id, c.req.param('snapshot_id'))),
});

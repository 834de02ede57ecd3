import { SnapshotListQuery } from '../../../../../shared/schemas/snapshot.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'snapshots.list',
  method: 'get',
  path: '/snapshots',
  auth: 'any',
  handler: (c, s) => c.json(s.snapshots.list(c.get('principal').org_id!, queryOf(c, SnapshotListQuery))),
});

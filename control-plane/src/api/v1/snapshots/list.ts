import { SnapshotListQuery } from '../../../../../shared/schemas/snapshot.js';
import { SnapshotPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'snapshots.list',
  method: 'get',
  path: '/snapshots',
  auth: 'any',
  query: SnapshotListQuery,
  responses: { 200: SnapshotPage },
  handler: async (c, s, io) => c.json(await s.snapshots.list(c.get('orgPrincipal').org_id, io.query())),
});

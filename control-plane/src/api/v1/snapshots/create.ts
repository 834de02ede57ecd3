import { CreateSnapshotRequest, WaitQuery } from '../../../../../shared/schemas/snapshot.js';
import { jsonBody, queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

/** 202 with the pending record; with `?wait=true`, 201 once the capture is ready (503 if it failed). */
export default defineOp({
  name: 'snapshots.create',
  method: 'post',
  path: '/snapshots',
  auth: 'any',
  permission: 'snapshots:write',
  async handler(c, s) {
    const q = queryOf(c, WaitQuery);
    const body = await jsonBody(c, CreateSnapshotRequest);
    const r = await s.snapshots.create(c.get('principal'), body, q.wait ?? false);
    return c.json(r.snapshot, r.settled ? 201 : 202);
  },
});

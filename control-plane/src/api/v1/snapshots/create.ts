import { CreateSnapshotRequest, Snapshot, WaitQuery } from '../../../../../shared/schemas/snapshot.js';
import { defineOp } from '../../op.js';

/** 202 with the pending record; with `?wait=true`, 201 once the capture is ready (503 if it failed). */
export default defineOp({
  name: 'snapshots.create',
  method: 'post',
  path: '/snapshots',
  auth: 'any',
  permission: 'snapshots:write',
  // Acts on a host's substrate without naming a machine route: captured on the machine's host.
  owner: 'host',
  hostChoice: (b) => ({ kind: 'machine', machineId: b.machine_id }),
  query: WaitQuery,
  body: CreateSnapshotRequest,
  responses: { 201: Snapshot, 202: Snapshot },
  async handler(c, s, io) {
    const q = io.query();
    const body = await io.body();
    const r = await s.snapshots.create(c.get('orgPrincipal'), body, q.wait ?? false);
    return c.json(r.snapshot, r.settled ? 201 : 202);
  },
});

import { ForkMachineRequest } from '../../../../../shared/schemas/snapshot.js';
import { Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/** Answers with the new machine once it is running, like create. */
export default defineOp({
  name: 'machines.fork',
  method: 'post',
  path: '/machines/:machine_id/fork',
  auth: 'any',
  permission: 'machines:create',
  // A fork of a snapshot is placed like a create of the parent's size (its snapshot's host first: nothing to copy);
  // a fork of the disk as it is now is made where the machine is (services/placement.ts `hostsFor`).
  owner: 'host',
  hostChoice: (b, params) => ({ kind: 'fork', machineId: params.machine_id ?? '', snapshotId: b.snapshot_id ?? null, region: b.region ?? null }),
  body: ForkMachineRequest,
  responses: { 201: Machine },
  async handler(c, s, io) {
    const id = machineIdParam(c);
    const body = await io.body();
    return c.json(await s.machines.fork(c.get('orgPrincipal'), id, body), 201);
  },
});

import { EventListQuery } from '../../../../../shared/schemas/machine.js';
import { MachineEventPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** Newest first, cursor-paginated. */
export default defineOp({
  name: 'machines.events',
  method: 'get',
  path: '/machines/:machine_id/events',
  auth: 'any',
  // Read from the store alone: served wherever it arrives, also while the machine's host is down (api/op.ts `owner`).
  owner: 'any',
  query: EventListQuery,
  responses: { 200: MachineEventPage },
  async handler(c, s, io) {
    const p = c.get('orgPrincipal');
    const id = machineIdParam(c);
    await s.machines.get(p.org_id, id);
    return c.json(await s.events.list(id, io.query()));
  },
});

import { EventListQuery } from '../../../../../shared/schemas/machine.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** Newest first, cursor-paginated. */
export default defineOp({
  name: 'machines.events',
  method: 'get',
  path: '/machines/:machine_id/events',
  auth: 'any',
  handler(c, s) {
    const p = c.get('principal');
    const id = machineIdParam(c);
    s.machines.get(p.org_id!, id);
    return c.json(s.events.list(id, queryOf(c, EventListQuery)));
  },
});

import { PortListQuery } from '../../../../../shared/schemas/ports.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

export default defineOp({
  name: 'ports.list',
  method: 'get',
  path: '/machines/:machine_id/ports',
  auth: 'any',
  handler: (c, s) => c.json(s.ports.list(c.get('principal').org_id!, machineIdParam(c), queryOf(c, PortListQuery))),
});

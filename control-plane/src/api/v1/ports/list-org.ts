import { PortListQuery } from '../../../../../shared/schemas/ports.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

/** Every published port of the organization, across its machines. */
export default defineOp({
  name: 'ports.list_org',
  method: 'get',
  path: '/ports',
  auth: 'any',
  handler: (c, s) => c.json(s.ports.listOrg(c.get('principal').org_id!, queryOf(c, PortListQuery))),
});

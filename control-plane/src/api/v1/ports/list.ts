import { PortListQuery } from '../../../../../shared/schemas/ports.js';
import { PreviewPage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

export default defineOp({
  name: 'ports.list',
  method: 'get',
  path: '/machines/:machine_id/ports',
  auth: 'any',
  // Read from the store alone: served wherever it arrives, also while the machine's host is down (api/op.ts `owner`).
  owner: 'any',
  query: PortListQuery,
  responses: { 200: PreviewPage },
  handler: async (c, s, io) => c.json(await s.ports.list(c.get('orgPrincipal').org_id, machineIdParam(c), io.query())),
});

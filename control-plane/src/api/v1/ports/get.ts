import { Preview } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';
import { previewIdParam } from './params.js';

export default defineOp({
  name: 'ports.get',
  method: 'get',
  path: '/machines/:machine_id/ports/:preview_id',
  auth: 'any',
  // Read from the store alone: served wherever it arrives, also while the machine's host is down (api/op.ts `owner`).
  owner: 'any',
  responses: { 200: Preview },
  handler: async (c, s) => c.json(await s.ports.get(c.get('orgPrincipal').org_id, machineIdParam(c), previewIdParam(c))),
});

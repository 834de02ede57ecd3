import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';
import { previewIdParam } from './params.js';

/** The hostname stops answering at once (open connections are cut) and is never issued again. */
export default defineOp({
  name: 'ports.unpublish',
  method: 'delete',
  path: '/machines/:machine_id/ports/:preview_id',
  auth: 'any',
  permission: 'ports:write',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.ports.unpublish(c.get('orgPrincipal'), machineIdParam(c), previewIdParam(c));
    return c.body(null, 204);
  },
});

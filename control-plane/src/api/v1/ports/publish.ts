import { PublishPortRequest } from '../../../../../shared/schemas/ports.js';
import { Preview } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** 201 with `secret` and `access_url` (private) once; an already published port answers 200 without them. */
export default defineOp({
  name: 'ports.publish',
  method: 'post',
  path: '/machines/:machine_id/ports',
  auth: 'any',
  permission: 'ports:write',
  body: PublishPortRequest,
  responses: { 200: Preview, 201: Preview },
  async handler(c, s, io) {
    const machineId = machineIdParam(c);
    const body = await io.body();
    const r = await s.ports.publish(c.get('orgPrincipal'), machineId, body);
    // The credentials in a creating answer must not be kept by any cache on the way.
    c.header('cache-control', 'no-store');
    return c.json(r.preview, r.created ? 201 : 200);
  },
});

import { defineOp } from '../../op.js';

/** Machines created from the template keep running with their disks. */
export default defineOp({
  name: 'templates.delete',
  method: 'delete',
  path: '/templates/:template_id',
  auth: 'any',
  permission: 'templates:write',
  // Acts on the host's substrate without naming a machine: the driver of the host placement picks serves it.
  owner: 'host',
  responses: { 204: 'empty' },
  async handler(c, s) {
    await s.templates.remove(c.get('orgPrincipal'), c.req.param('template_id'));
    return c.body(null, 204);
  },
});

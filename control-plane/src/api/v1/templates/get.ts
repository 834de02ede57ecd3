import { Template } from '../../../../../shared/schemas/template.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'templates.get',
  method: 'get',
  path: '/templates/:template_id',
  auth: 'any',
  responses: { 200: Template },
  handler: async (c, s) => c.json(await s.templates.get(c.get('orgPrincipal').org_id, c.req.param('template_id'))),
});

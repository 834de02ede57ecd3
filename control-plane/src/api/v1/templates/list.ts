import { TemplateListQuery } from '../../../../../shared/schemas/template.js';
import { TemplatePage } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'templates.list',
  method: 'get',
  path: '/templates',
  auth: 'any',
  query: TemplateListQuery,
  responses: { 200: TemplatePage },
  handler: async (c, s, io) => c.json(await s.templates.list(c.get('orgPrincipal').org_id, io.query())),
});

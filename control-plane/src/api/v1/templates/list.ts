import { TemplateListQuery } from '../../../../../shared/schemas/template.js';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'templates.list',
  method: 'get',
  path: '/templates',
  auth: 'any',
  handler: (c, s) => c.json(s.templates.list(c.get('principal').org_id!, queryOf(c, TemplateListQuery))),
});

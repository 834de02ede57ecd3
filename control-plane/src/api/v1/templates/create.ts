import { WaitQuery } from '../../../../../shared/schemas/snapshot.js';
import { CreateTemplateRequest } from '../../../../../shared/schemas/template.js';
import { jsonBody, queryOf } from '../../body.js';
import { defineOp } from '../../op.js';

/** 202 while building; 201 when ready (at once for a size-only template, or with `?wait=true`). */
export default defineOp({
  name: 'templates.create',
  method: 'post',
  path: '/templates',
  auth: 'any',
  permission: 'templates:write',
  async handler(c, s) {
    const q = queryOf(c, WaitQuery);
    const body = await jsonBody(c, CreateTemplateRequest);
    const r = await s.templates.create(c.get('principal'), body, q.wait ?? false);
    return c.json(r.template, r.settled ? 201 : 202);
  },
});

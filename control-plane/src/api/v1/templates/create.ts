import { WaitQuery } from '../../../../../shared/schemas/snapshot.js';
import { CreateTemplateRequest, Template } from '../../../../../shared/schemas/template.js';
import { defineOp } from '../../op.js';

/** 202 while building; 201 when ready (at once for a size-only template, or with `?wait=true`). */
export default defineOp({
  name: 'templates.create',
  method: 'post',
  path: '/templates',
  auth: 'any',
  permission: 'templates:write',
  // Acts on the host's substrate without naming a machine: the driver of the host placement picks serves it.
  owner: 'host',
  query: WaitQuery,
  body: CreateTemplateRequest,
  responses: { 201: Template, 202: Template },
  async handler(c, s, io) {
    const q = io.query();
    const body = await io.body();
    const r = await s.templates.create(c.get('orgPrincipal'), body, q.wait ?? false);
    return c.json(r.template, r.settled ? 201 : 202);
  },
});

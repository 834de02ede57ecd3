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
  // Acts on a host's substrate without naming a machine route: captured where the machine (or the snapshot's machine)
  // is; an image template here.
  owner: 'host',
  hostChoice: (b) =>
    b.machine_id !== undefined ? { kind: 'machine', machineId: b.machine_id }
    : b.snapshot_id !== undefined ? { kind: 'snapshot', snapshotId: b.snapshot_id }
    : { kind: 'here' },
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

import { CreateMachineRequest, Machine } from '../../../../../shared/schemas/machine.js';
import { defineOp } from '../../op.js';

/** Answers once the machine is running (the desktop may not answer yet), or stopped with start:false. */
export default defineOp({
  name: 'machines.create',
  method: 'post',
  path: '/machines',
  auth: 'any',
  permission: 'machines:create',
  // Acts on a host's substrate without naming a machine: the driver of the host placement picks serves it — ranked
  // by size and region, or, from a template, where the template's layers are (services/placement.ts `hostsFor`).
  owner: 'host',
  hostChoice: (b) =>
    b.template !== undefined
      ? { kind: 'template', template: b.template, size: b.size, region: b.region ?? null }
      : { kind: 'place', size: b.size ?? 'small', region: b.region ?? null },
  body: CreateMachineRequest,
  responses: { 201: Machine },
  async handler(c, s, io) {
    const body = await io.body();
    return c.json(await s.machines.create(c.get('orgPrincipal'), body), 201);
  },
});

import { z } from 'zod';
import { MachineSecretList } from '../../../../../shared/schemas/secrets.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** Names, versions and delivery state of one machine's secrets, by name. */
export default defineOp({
  name: 'secrets.list',
  method: 'get',
  path: '/machines/:machine_id/secrets',
  auth: 'any',
  // Read from the store alone: served wherever it arrives, also while the machine's host is down (api/op.ts `owner`).
  owner: 'any',
  query: z.strictObject({}),
  responses: { 200: MachineSecretList },
  async handler(c, s, io) {
    const machineId = machineIdParam(c);
    io.query();
    return c.json(await s.secrets.list(c.get('orgPrincipal').org_id, machineId));
  },
});

import { z } from 'zod';
import { queryOf } from '../../body.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from '../machines/proxy.js';

/** Names, versions and delivery state of one machine's secrets, by name. */
export default defineOp({
  name: 'secrets.list',
  method: 'get',
  path: '/machines/:machine_id/secrets',
  auth: 'any',
  handler(c, s) {
    const machineId = machineIdParam(c);
    queryOf(c, z.strictObject({}));
    return c.json(s.secrets.list(c.get('principal').org_id!, machineId));
  },
});

import { pageOf } from '../../../../../shared/schemas/responses.js';
import { UsageListQuery, UsageRecord } from '../../../../../shared/schemas/usage.js';
import { defineOp } from '../../op.js';

/** Raw hourly records whose hour overlaps [start, end), oldest first, cursor-paginated (usage:read: membership). */
export default defineOp({
  name: 'usage.list',
  method: 'get',
  path: '/usage',
  summary: 'Raw usage records of a period',
  auth: 'any',
  query: UsageListQuery,
  responses: { 200: pageOf(UsageRecord) },
  handler: async (c, s, io) => c.json(await s.usage.list(c.get('orgPrincipal').org_id, io.query())),
});

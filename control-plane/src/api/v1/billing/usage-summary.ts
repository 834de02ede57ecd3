import { UsageSummary, UsageSummaryQuery } from '../../../../../shared/schemas/usage.js';
import { defineOp } from '../../op.js';

/** The current period's summary (`estimate`), or a closed one's (`final`) by its start. */
export default defineOp({
  name: 'billing.usage_summary',
  method: 'get',
  path: '/billing/usage-summary',
  summary: 'Priced usage of the current (or a closed) billing period',
  auth: 'any',
  query: UsageSummaryQuery,
  responses: { 200: UsageSummary },
  handler: async (c, s, io) => c.json(await s.usage.summary(c.get('orgPrincipal').org_id, io.query())),
});

import { UsageSeries, UsageSeriesQuery } from '../../../../../shared/schemas/usage.js';
import { defineOp } from '../../op.js';

/** Usage bucketed by the server: hourly up to a week, daily beyond; empty buckets absent. */
export default defineOp({
  name: 'usage.series',
  method: 'get',
  path: '/usage/series',
  summary: 'Usage bucketed by hour (up to a week) or day',
  auth: 'any',
  query: UsageSeriesQuery,
  responses: { 200: UsageSeries },
  handler: async (c, s, io) => c.json(await s.usage.series(c.get('orgPrincipal').org_id, io.query())),
});

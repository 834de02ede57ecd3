import { catalogAt, findPlan } from '../../../domain/catalog.js';
import { PlanDetail } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { planView } from './view.js';
import { ERRORS } from '../../../errors.js';

export default defineOp({
  name: 'plans.get',
  method: 'get',
  path: '/plans/:plan_id',
  auth: 'none',
  responses: { 200: PlanDetail },
  handler(c, s) {
    const cat = catalogAt(s.now(), s.billing.catalog);
    const p = findPlan(cat, c.req.param('plan_id'));
    if (!p) throw ERRORS.noSuchPlan();
    return c.json({ ...planView(cat, p), sizes: cat.sizes, prices: cat.prices, currency: cat.currency });
  },
});

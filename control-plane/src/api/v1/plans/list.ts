import { catalogAt } from '../../../domain/catalog.js';
import { PlanList } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';
import { planView } from './view.js';

/** The catalog is public: a pricing page needs no credential. */
export default defineOp({
  name: 'plans.list',
  method: 'get',
  path: '/plans',
  auth: 'none',
  responses: { 200: PlanList },
  handler(c, s) {
    const cat = catalogAt(s.now(), s.billing.catalog);
    return c.json({
      catalog_version: cat.version,
      effective_from: cat.effective_from,
      currency: cat.currency,
      sizes: cat.sizes,
      prices: cat.prices,
      data: cat.plans.map((p) => planView(cat, p)),
      next_cursor: null,
    });
  },
});

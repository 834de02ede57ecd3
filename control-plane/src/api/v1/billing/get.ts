import { findPlan, trialTerms } from '../../../domain/catalog.js';
import { BillingAccount } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'billing.get',
  method: 'get',
  path: '/billing',
  auth: 'any',
  responses: { 200: BillingAccount },
  async handler(c, s) {
    const orgId = c.get('orgPrincipal').org_id;
    const a = await s.billing.account(orgId);
    const cat = s.billing.catalogFor(a);
    const plan = a.plan_id ? findPlan(cat, a.plan_id) : undefined;
    return c.json({
      organization_id: orgId,
      state: a.state,
      provider: a.provider,
      plan: a.plan_id ? { id: a.plan_id, name: plan?.name ?? a.plan_id } : null,
      catalog_version: a.catalog_version,
      period: a.period_start ? { start: a.period_start, end: a.period_end } : null,
      ...(a.state === 'trialing' ? { trial_ends_at: a.trial_ends_at, trial: trialTerms(cat, a.plan_id!) } : {}),
      limits: await s.quotas.limits(orgId),
    });
  },
});

import type { CatalogVersion, PlanSpec } from '../../../domain/catalog.js';
import { trialTerms } from '../../../domain/catalog.js';

export function planView(cat: CatalogVersion, p: PlanSpec) {
  return {
    id: p.id,
    name: p.name,
    catalog_version: cat.version,
    effective_from: cat.effective_from,
    price: p.monthly_price === null ? null : { amount: p.monthly_price, currency: cat.currency, interval: 'month' },
    self_serve: p.self_serve,
    entitlements: p.entitlements,
    trial: p.self_serve ? trialTerms(cat, p.id) : null,
  };
}

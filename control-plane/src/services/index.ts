import { createBuiltinProvider, type BuiltinProvider } from '../billing/builtin.js';
import type { BillingProvider } from '../billing/provider.js';
import { sha256Hex } from '../auth/tokens.js';
import type { ScryptCost } from '../auth/passwords.js';
import { isRecognisedOrigin, type Config } from '../config.js';
import type { CatalogVersion } from '../domain/catalog.js';
import type { CountedLimitKey } from '../domain/quotas.js';
import type { RateRule } from '../domain/rate-limits.js';
import type { Store } from '../store/store.js';
import { createBillingService } from './billing.js';
import { createIdentityService } from './identity.js';
import { createOrganizationService } from './organizations.js';
import { createQuotaService, type Counter } from './quotas.js';
import { createRateLimiter } from './rate-limiter.js';

export interface ServiceDeps {
  config: Config;
  store: Store;
  now?: () => Date;
  passwordCost?: ScryptCost;
  catalog?: readonly CatalogVersion[];
  rateRules?: Record<'signup_ip' | 'login_failure_email', RateRule>;
  counters?: Partial<Record<CountedLimitKey, Counter>>;
  /** Replaces the built-in provider (config.billingProvider names which one main.ts builds). */
  billingProvider?: (sink: ReturnType<typeof createBillingService>['sink']) => BillingProvider;
}

export function createServices(d: ServiceDeps) {
  const now = d.now ?? (() => new Date());
  const { store, config } = d;
  const limiter = createRateLimiter(store, now, d.rateRules);
  const billing = createBillingService({
    store, now, providerName: config.billingProvider, catalog: d.catalog,
    isRecognisedOrigin: (o) => isRecognisedOrigin(config, o),
  });
  let builtin: BuiltinProvider | null = null;
  if (d.billingProvider) billing.setProvider(d.billingProvider(billing.sink));
  else {
    builtin = createBuiltinProvider({ store, sink: billing.sink, publicBaseUrl: config.publicBaseUrl, now, hash: sha256Hex });
    billing.setProvider(builtin);
  }
  const quotas = createQuotaService({
    billing,
    upgradeUrl: config.upgradeUrl,
    counters: { members: (orgId) => store.identity.countMembers(orgId), ...d.counters },
  });
  const identity = createIdentityService({ store, now, limiter, passwordCost: d.passwordCost, openBillingAccount: (orgId) => billing.open(orgId) });
  const orgs = createOrganizationService({ store, now, quotas });
  return { config, store, now, limiter, billing, builtin, quotas, identity, orgs };
}
export type Services = ReturnType<typeof createServices>;

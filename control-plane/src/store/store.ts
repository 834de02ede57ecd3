import type { Db } from './db.js';
import { accessRepo } from './repos/access.js';
import { billingRepo, rateLimitRepo } from './repos/billing.js';
import { identityRepo } from './repos/identity.js';

export function createStore(db: Db) {
  return {
    db,
    identity: identityRepo(db),
    access: accessRepo(db),
    billing: billingRepo(db),
    rateLimits: rateLimitRepo(db),
  };
}
export type Store = ReturnType<typeof createStore>;

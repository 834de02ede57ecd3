import type { Db } from './db.js';
import { accessRepo } from './repos/access.js';
import { billingRepo, rateLimitRepo } from './repos/billing.js';
import { drainRepo } from './repos/drain.js';
import { hostsRepo } from './repos/hosts.js';
import { identityRepo } from './repos/identity.js';
import { eventsRepo, leasesRepo, machinesRepo, sessionsRepo, volumeRestartsRepo } from './repos/machines.js';
import { placementRepo } from './repos/placement.js';
import { previewsRepo } from './repos/previews.js';
import { snapshotsRepo, templatesRepo } from './repos/snapshots.js';
import { secretsRepo } from './repos/secrets.js';
import { stripeRepo } from './repos/stripe.js';
import { usageRepo } from './repos/usage.js';

export function createStore(db: Db) {
  return {
    db,
    identity: identityRepo(db),
    access: accessRepo(db),
    billing: billingRepo(db),
    rateLimits: rateLimitRepo(db),
    machines: machinesRepo(db),
    hosts: hostsRepo(db),
    drain: drainRepo(db),
    volumeRestarts: volumeRestartsRepo(db),
    sessions: sessionsRepo(db),
    leases: leasesRepo(db),
    events: eventsRepo(db),
    snapshots: snapshotsRepo(db),
    templates: templatesRepo(db),
    secrets: secretsRepo(db),
    previews: previewsRepo(db),
    placement: placementRepo(db),
    usage: usageRepo(db),
    stripe: stripeRepo(db),
  };
}
export type Store = ReturnType<typeof createStore>;

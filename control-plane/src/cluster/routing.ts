/**
 * What the API routes by on PostgreSQL (api/middleware/owner-route.ts): who owns a machine, which hosts an operation
 * may go to, and the forwarder. Built by cluster/wiring.ts; absent on SQLite (one process serves all).
 */
import type { HostChoice, Placement } from '../services/placement.js';
import type { Forwarder } from './forward/forwarder.js';
import type { OwnerCache } from './owner-cache.js';
import type { Owner, OwnerOf } from './forward/owner.js';

/** The cluster's side of routing, wired by main.ts on PostgreSQL (absent on SQLite: one process serves all). */
export interface Routing {
  ownerOf: OwnerOf;
  /** The remote owners this process forwarded to lately (cluster/owner-cache.ts): tried before `ownerOf`. */
  owners: OwnerCache;
  /** This process's host (its DATA_DIR's id): where a `host` operation with no better host goes. */
  hostId: string;
  /** Who drives host `hostId` now (cluster/owner-of.ts `ownerOfHost`); rejects when nobody does. */
  ownerOfHost(hostId: string): Promise<Owner>;
  /** The hosts a `host` operation may go to, best first (services/placement.ts `hostsFor`); throws its 400 and 503. */
  hostsFor(orgId: string, choice: HostChoice): Promise<Placement>;
  /** Whether a machine is recorded on a host that is down (for `onLostHost` operations). */
  onDownHost(machineId: string): Promise<boolean>;
  forwarder: Forwarder;
  trustProxy: boolean;
  /** The Host asserted when the caller's cannot be carried (malformed): the public base URL's. */
  publicHost: string;
}


/**
 * Placement across hosts (issue 25 item 2; docs/scale.md, "Placement"), in two halves that meet over the forward:
 *
 * - `placeFor(store, ask)`: where a create goes, read-only. The process a create reaches ranks the registered hosts
 *   (domain/placement.ts) and forwards the create to the best one's process; an unknown region is a 400, no room a
 *   503 `compute_unavailable` (Retry-After). `anywhere` when no host has registered (SQLite, or PostgreSQL before a
 *   driver registered): the process serves it itself, as before hosts existed.
 * - `roomOnHost(store, hostId, …)`: on the chosen host, inside the transaction that records the machine, its row
 *   locked (store/repos/placement.ts `lockHost`) and the fit re-checked with what is placed there now, so two API
 *   processes can never overfill a host; a create that lost the race is the same 503.
 *
 * Forks go to the parent's host (its disk is there; the forward routes a fork by the parent's id), so do restores
 * (in place) and creates from a template (the template's layers are on the host that captured them) for now: the
 * disk decides the host, and a full host answers 503 rather than moving data (issue 25 item 4 moves it).
 */
import type { MachineSize } from '../../../shared/schemas/machine.js';
import { CATALOG, catalogAt, type CatalogVersion } from '../domain/catalog.js';
import { computeFit, decidePlacement, hostFit, placedUsage, type PlacementCandidate, type PlacementNeed } from '../domain/placement.js';
import { ERRORS } from '../errors.js';
import type { HostPlacement } from '../store/repos/placement.js';
import type { Store } from '../store/store.js';
import { resourcesForSize } from '../substrate/substrate.js';

export interface PlacementAsk {
  size: MachineSize;
  /** The create's region hint; null: any region. */
  region: string | null;
}

/** Where a create goes: any process (no host registered), or the ranked hosts' processes, best first (never empty). */
export type Placement = { kind: 'anywhere' } | { kind: 'hosts'; ranked: string[] };

/** The catalog in effect, for pricing machine sizes. */
export interface PlacementPricing {
  now: Date;
  catalog?: readonly CatalogVersion[];
}

type Sizes = ReturnType<typeof catalogAt>['sizes'];

const sizesAt = (p: PlacementPricing): Sizes => catalogAt(p.now, p.catalog ?? CATALOG).sizes;

function candidate(h: HostPlacement, sizes: Sizes): PlacementCandidate {
  return { id: h.id, region: h.region, state: h.state, capacity: h.capacity, placed: placedUsage(h.counts, sizes) };
}

/** The ranking a create's process forwards by (see the header). Throws 400 unknown region, 503 no room. */
export async function placeFor(store: Store, ask: PlacementAsk, pricing: PlacementPricing = { now: new Date() }): Promise<Placement> {
  const sizes = sizesAt(pricing);
  const hosts = (await store.placement.candidates()).map((h) => candidate(h, sizes));
  const decision = decidePlacement(hosts, { need: resourcesForSize(ask.size, sizes), region: ask.region });
  switch (decision.kind) {
    case 'unregistered':
      return { kind: 'anywhere' };
    case 'ranked':
      return { kind: 'hosts', ranked: decision.hosts };
    case 'unknown_region':
      throw ERRORS.unknownRegion(decision.region);
    case 'no_room':
      throw ERRORS.noRoomToPlace(ask.size, ask.region);
  }
}

/**
 * What is being admitted on the host: a new machine (its disk, and its compute if it starts; the host must be
 * active and, for a create with a hint, in that region), or a start of a machine already there (compute only, in
 * any state: a cordoned host keeps running its machines).
 */
export type HostAdmission =
  | { kind: 'new'; size: MachineSize; start: boolean; region: string | null }
  | { kind: 'start'; size: MachineSize };

/**
 * Inside the admitting transaction, after the organization's lock: locks host `hostId`'s row and re-checks the fit.
 * False when the host is not registered (the caller admits as a host-less deployment does); throws 503 when it does
 * not fit.
 */
export async function roomOnHost(store: Store, hostId: string, a: HostAdmission, pricing: PlacementPricing): Promise<boolean> {
  const locked = await store.placement.lockHost(hostId);
  if (!locked) return false;
  const sizes = sizesAt(pricing);
  const host = candidate(locked, sizes);
  const r = resourcesForSize(a.size, sizes);
  const compute: PlacementNeed = { memory_mb: r.memory_mb, vcpu: r.vcpu, disk_gb: 0 };
  const fit =
    a.kind === 'start'
      ? computeFit(host, compute)
      : hostFit(host, a.start ? { ...compute, disk_gb: r.disk_gb } : { memory_mb: 0, vcpu: 0, disk_gb: r.disk_gb }, a.region);
  if (!fit.ok) throw ERRORS.noRoomToPlace(a.size, a.kind === 'new' ? a.region : null);
  return true;
}

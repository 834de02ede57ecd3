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
 * - `hostsFor(store, orgId, choice)`: the hosts an operation that makes something on a substrate may go to, from what
 *   its request asks (`HostChoice`, declared per operation in api/op.ts): a plain create is ranked by `placeFor`;
 *   a create from a template goes to the host holding the template's layers when it is known, a template or snapshot
 *   of a machine to that machine's host; the rest (`here`) to this process's host.
 * - A fork is ranked by `placeFor` for the parent's size and the fork's region hint (default: the parent's), the host
 *   holding its disk first when it fits (nothing to copy): the snapshot's host for a fork of a snapshot (on another
 *   host its layers are pulled first, services/layer-pull.ts), the parent's host for a fork of the disk as it is now
 *   (on another host the parent's disk is captured live on its host and pulled, services/live-fork.ts).
 *
 * Restores are in place: the machine's host, pulling the snapshot's layers when they are on another host.
 */
import type { AppError } from '../../../shared/errors.js';
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
  if (!fit.ok) throw placementRefusal(ERRORS.noRoomToPlace(a.size, a.kind === 'new' ? a.region : null));
  return true;
}

const refusals = new WeakSet<Error>();

/**
 * Marks `e` as a refusal by the chosen host before it recorded anything (it lost the race for its room, or its
 * process no longer drives it): the process that forwarded the create may try the next ranked host.
 */
export function placementRefusal(e: AppError): AppError {
  refusals.add(e);
  return e;
}

export function isPlacementRefusal(e: unknown): boolean {
  return e instanceof Error && refusals.has(e);
}

/**
 * How an operation that makes something on a substrate picks its host, from its parsed request (api/op.ts
 * `hostChoice`): `place` — rank the hosts by size and region; `template` — a create from a template: where its
 * layers are, if known; `machine` / `snapshot` — where that machine (the snapshot's machine) is; `here` — this
 * process's host.
 */
export type HostChoice =
  | { kind: 'place'; size: MachineSize; region: string | null }
  | { kind: 'template'; template: string; size: MachineSize | undefined; region: string | null }
  | { kind: 'machine'; machineId: string }
  | { kind: 'fork'; machineId: string; snapshotId: string | null; region: string | null }
  | { kind: 'snapshot'; snapshotId: string }
  | { kind: 'here' };

const HERE: Placement = { kind: 'anywhere' };
const on = (hostId: string | null | undefined): Placement => (hostId ? { kind: 'hosts', ranked: [hostId] } : HERE);

/**
 * The hosts `choice` may go to, best first, or `anywhere` (this process's host). Something the organization does not
 * have (no such machine, template or snapshot) is `anywhere`: the handler answers its 404 as it would anywhere.
 * Throws `placeFor`'s 400 and 503.
 */
export async function hostsFor(store: Store, orgId: string, choice: HostChoice, pricing: PlacementPricing = { now: new Date() }): Promise<Placement> {
  const machineHost = async (id: string | null | undefined) => (id ? (await store.machines.inOrg(orgId, id))?.host_id : null);
  switch (choice.kind) {
    case 'place':
      return placeFor(store, { size: choice.size, region: choice.region }, pricing);
    case 'template': {
      const t = await store.templates.inOrg(orgId, choice.template);
      if (!t) return HERE;
      // An image template has no layer: any host can make it, so it is placed like a plain create of its size.
      if (t.layer_id === null) return placeFor(store, { size: choice.size ?? t.size, region: choice.region }, pricing);
      const snapshotMachine = t.snapshot_id ? (await store.snapshots.inOrg(orgId, t.snapshot_id))?.machine_id : null;
      return on(await machineHost(t.machine_id ?? snapshotMachine));
    }
    case 'machine':
      return on(await machineHost(choice.machineId));
    case 'fork':
      return forkHosts(store, orgId, choice, pricing);
    case 'snapshot':
      return on(await machineHost((await store.snapshots.inOrg(orgId, choice.snapshotId))?.machine_id));
    case 'here':
      return HERE;
  }
}

/** The parent states a fork of the disk as it is now captures (create.ts refuses the others with its 409). */
const LIVE_FORKABLE = new Set(['running', 'stopped']);

/**
 * Where a fork goes (see the header): placed like a create of the parent's size, where its disk is first when that
 * host fits. A fork the handler refuses (no such snapshot, another machine's, a parent it cannot capture) goes to the
 * parent's host, which answers the refusal as before.
 */
async function forkHosts(store: Store, orgId: string, choice: Extract<HostChoice, { kind: 'fork' }>, pricing: PlacementPricing): Promise<Placement> {
  const parent = await store.machines.inOrg(orgId, choice.machineId);
  if (!parent) return HERE;
  const snap = choice.snapshotId === null ? null : ((await store.snapshots.inOrg(orgId, choice.snapshotId)) ?? null);
  const refused = choice.snapshotId === null ? !LIVE_FORKABLE.has(parent.state) : snap?.machine_id !== parent.id;
  if (refused) return on(parent.host_id);
  const placed = await placeFor(store, { size: parent.size, region: choice.region ?? parent.region }, pricing);
  if (placed.kind === 'anywhere') return placed;
  // The host holding the disk: the snapshot's layers, or the parent's disk as it is now.
  const home = snap ? snap.host_id ?? parent.host_id : parent.host_id;
  return home && placed.ranked.includes(home) ? { kind: 'hosts', ranked: [home, ...placed.ranked.filter((h) => h !== home)] } : placed;
}

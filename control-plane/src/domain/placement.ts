/**
 * Placement across hosts (issue 25 item 2), pure: which registered hosts may take a new machine, best first, or why
 * none may. The store reads the candidates (store/repos/placement.ts); `placeFor` ranks them for the process that
 * forwards a create; the chosen host's own admission re-checks one host with `hostFit` under its row lock.
 *
 * Rules (docs/scale.md, "Placement"):
 * - Only an `active` host takes new machines (domain/host-states.ts `takesNewMachines`): cordoned, draining and down
 *   hosts never.
 * - A region hint names a region some host has registered (in any state), else it is the caller's mistake (400);
 *   no hint: every region.
 * - Fit: memory and disk are never overcommitted (memory committed ≤ the host's memory × PLACEMENT_POLICY.memory,
 *   a ratio ≤ 1 that keeps a reserve for the host itself; disks at their full provisioned size ≤ the host's disk);
 *   vCPUs may be committed up to cores × PLACEMENT_POLICY.cpu. Memory and vCPUs count the machines holding compute
 *   (creating, starting, running, stopping); disk counts every live machine on the host (a stopped one keeps its disk).
 * - Spread: the fitting hosts ranked by most free memory (after the machine), then fewest machines, then id, in
 *   byte order. Deterministic, not sampled (why: docs/scale.md).
 */
import { capacityLimits, type CommitRatios } from './capacity.js';
import type { HostShape } from './host-capacity.js';
import { takesNewMachines, type HostState } from './host-states.js';

/**
 * The placement policy, one constant for every host: CPUs overcommitted 4×, as E2B does; memory committed up to 0.9
 * of the host's (never above 1: a guest touching all its memory must get it); disks never overcommitted.
 */
export const PLACEMENT_POLICY: Readonly<CommitRatios> = { memory: 0.9, cpu: 4 };

/** What the machines recorded on a host hold. */
export interface PlacedUsage {
  /** Memory and vCPUs of the machines holding compute. */
  memory_mb: number;
  vcpu: number;
  /** Provisioned disk of every live machine. */
  disk_gb: number;
  /** Live machines. */
  machines: number;
}

export interface PlacementCandidate {
  id: string;
  region: string;
  state: HostState;
  capacity: HostShape;
  placed: PlacedUsage;
}

/** What one more machine needs on a host: a new machine its memory, vCPUs and disk; a start of one already there, no disk. */
export interface PlacementNeed {
  memory_mb: number;
  vcpu: number;
  disk_gb: number;
}

export interface PlacementRequest {
  need: PlacementNeed;
  /** The caller's placement hint; null: any region. */
  region: string | null;
}

export type Misfit = 'not_active' | 'other_region' | 'memory' | 'cpu' | 'disk';

export type HostFit = { ok: true; freeMemoryMb: number } | { ok: false; misfit: Misfit };

export type PlacementDecision =
  /** No host has registered: a deployment without a registry (SQLite, or PostgreSQL before a driver registered). */
  | { kind: 'unregistered' }
  /** The hosts that fit, best first (never empty). */
  | { kind: 'ranked'; hosts: string[] }
  | { kind: 'unknown_region'; region: string }
  | { kind: 'no_room' };

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/** Machines recorded on a host of one size: `live` of them, `compute` of which hold compute. */
export interface PlacedCount {
  size: string;
  live: number;
  compute: number;
}

/**
 * What `counts` hold, priced with the catalog's `sizes`. A size no longer in the catalog holds what the largest size
 * holds (as domain/capacity.ts's `committedBy`): never counted as free.
 */
export function placedUsage(counts: readonly PlacedCount[], sizes: ReadonlyArray<{ id: string; vcpu: number; memory_mb: number; disk_gb: number }>): PlacedUsage {
  const u: PlacedUsage = { memory_mb: 0, vcpu: 0, disk_gb: 0, machines: 0 };
  for (const c of counts) {
    const s = sizes.find((x) => x.id === c.size) ?? sizes.reduce((a, b) => (b.memory_mb > a.memory_mb ? b : a));
    u.memory_mb += s.memory_mb * c.compute;
    u.vcpu += s.vcpu * c.compute;
    u.disk_gb += s.disk_gb * c.live;
    u.machines += c.live;
  }
  return u;
}

/** May `host` take `need` (in `region`, if given) under `policy`, and how much memory is left free after it? */
export function hostFit(host: PlacementCandidate, need: PlacementNeed, region: string | null, policy: Readonly<CommitRatios> = PLACEMENT_POLICY): HostFit {
  if (!takesNewMachines(host.state)) return { ok: false, misfit: 'not_active' };
  if (region !== null && host.region !== region) return { ok: false, misfit: 'other_region' };
  return computeFit(host, need, policy);
}

/**
 * The resources alone (memory, then vCPUs, then disk), whatever the host's state and region: a start of a machine
 * already on a cordoned host still needs room there, and nothing else.
 */
export function computeFit(host: Pick<PlacementCandidate, 'capacity' | 'placed'>, need: PlacementNeed, policy: Readonly<CommitRatios> = PLACEMENT_POLICY): HostFit {
  const limit = capacityLimits({ vcpu: host.capacity.cores, memory_mb: Math.floor(host.capacity.memory_bytes / MIB) }, policy);
  const memoryAfter = host.placed.memory_mb + need.memory_mb;
  if (memoryAfter > limit.memory_mb) return { ok: false, misfit: 'memory' };
  if (host.placed.vcpu + need.vcpu > limit.vcpu) return { ok: false, misfit: 'cpu' };
  if ((host.placed.disk_gb + need.disk_gb) * GIB > host.capacity.disk_bytes) return { ok: false, misfit: 'disk' };
  return { ok: true, freeMemoryMb: limit.memory_mb - memoryAfter };
}

const byteOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The decision for `request` over every registered host (in any state). */
export function decidePlacement(hosts: readonly PlacementCandidate[], request: PlacementRequest, policy: Readonly<CommitRatios> = PLACEMENT_POLICY): PlacementDecision {
  if (hosts.length === 0) return { kind: 'unregistered' };
  if (request.region !== null && !hosts.some((h) => h.region === request.region)) return { kind: 'unknown_region', region: request.region };
  const fitting: Array<{ host: PlacementCandidate; free: number }> = [];
  for (const host of hosts) {
    const fit = hostFit(host, request.need, request.region, policy);
    if (fit.ok) fitting.push({ host, free: fit.freeMemoryMb });
  }
  if (fitting.length === 0) return { kind: 'no_room' };
  fitting.sort((a, b) => b.free - a.free || a.host.placed.machines - b.host.placed.machines || byteOrder(a.host.id, b.host.id));
  return { kind: 'ranked', hosts: fitting.map((f) => f.host.id) };
}

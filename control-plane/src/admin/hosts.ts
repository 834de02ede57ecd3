/**
 * `computer-admin hosts …` (issue 25 item 6): the operator's view of the host registry and the cordon.
 *
 *   hosts list [--json]          every host: id, region, state, epoch, machines, capacity, heartbeat age
 *   hosts cordon HOST            no new machines on HOST (its machines keep running)
 *   hosts uncordon HOST          HOST takes new machines again
 *   hosts drain HOST [--json]    HOST to `draining`, then its drain followed until it is empty (admin/drain.ts)
 *
 * State moves are domain/host-states.ts's table, written by compare-and-set (store/repos/hosts.ts `operate`).
 * Heartbeat ages count on the database's clock (the one the heartbeats are written with).
 */
import { isIdOf } from '../../../shared/ids.js';
import type { Engine } from '../store/engine/migrations.js';
import type { DrainRepo } from '../store/repos/drain.js';
import type { HostListing, HostsRepo } from '../store/repos/hosts.js';
import type { MachineRow } from '../store/repos/machines.js';
import { ADMIN_ERRORS } from './admin-errors.js';
import { drainText, followDrain } from './drain.js';

const GIB = 1024 ** 3;

/** `1.2 s ago`, `7 min ago`, `5 h ago`, `3 d ago`; `never` for a host that never heartbeat. */
export function formatAge(ageMs: number | null): string {
  if (ageMs === null) return 'never';
  const s = Math.max(0, ageMs) / 1000;
  if (s < 60) return `${s.toFixed(1)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

const ageOf = (heartbeatAt: string | null, nowMs: number) => (heartbeatAt === null ? null : nowMs - Date.parse(heartbeatAt));

/** The list as data (`--json`): what an operator's script reads. */
export function hostsJson(listing: HostListing, nowMs: number) {
  return {
    hosts: listing.hosts.map((h) => ({
      id: h.id,
      region: h.region,
      state: h.state,
      epoch: h.epoch,
      machines: h.machines,
      capacity: h.capacity,
      heartbeat_at: h.heartbeat_at,
      heartbeat_age_ms: ageOf(h.heartbeat_at, nowMs),
    })),
  };
}

/** The list as a table, one line per host. */
export function hostsTable(listing: HostListing, nowMs: number): string[] {
  if (listing.hosts.length === 0) return ['no hosts registered yet (a host registers when its control plane starts)'];
  const header = ['ID', 'REGION', 'STATE', 'EPOCH', 'MACHINES', 'CORES', 'MEMORY', 'DISK', 'HOLDS', 'HEARTBEAT'];
  const rows = listing.hosts.map((h) => [
    h.id,
    h.region,
    h.state,
    String(h.epoch),
    String(h.machines),
    String(h.capacity.cores),
    `${(h.capacity.memory_bytes / GIB).toFixed(1)} GiB`,
    `${(h.capacity.disk_bytes / GIB).toFixed(1)} GiB`,
    Object.entries(h.capacity.machines).map(([size, n]) => `${size}:${n}`).join(' '),
    formatAge(ageOf(h.heartbeat_at, nowMs)),
  ]);
  const widths = header.map((_, i) => Math.max(header[i]!.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)];
}

export interface HostsCommandDeps {
  engine: Engine;
  hosts: HostsRepo;
  drain: DrainRepo;
  onHost(hostId: string): Promise<MachineRow[]>;
  out(line: string): void;
  /** Between two reads of a drain's progress (default 1 s). */
  pollMs?: number;
  /** Pins the clock heartbeat ages count on (tests); default the database's. */
  now?: () => number;
}

/** Runs `hosts <args>`; returns the exit code. Refusals are thrown as AdminError (admin-errors.ts). */
export async function runHosts(args: string[], d: HostsCommandDeps): Promise<number> {
  const [verb, ...rest] = args;
  if (verb === 'list') {
    const json = rest.length === 1 && rest[0] === '--json';
    if (rest.length > 0 && !json) throw ADMIN_ERRORS.usage();
    const listing = await d.hosts.list();
    const nowMs = d.now?.() ?? Date.parse(listing.now);
    if (json) d.out(JSON.stringify(hostsJson(listing, nowMs)));
    else for (const l of hostsTable(listing, nowMs)) d.out(l);
    return 0;
  }
  if (verb !== 'cordon' && verb !== 'uncordon' && verb !== 'drain') throw ADMIN_ERRORS.usage();
  const [host, ...extra] = rest;
  const json = verb === 'drain' && extra.length === 1 && extra[0] === '--json';
  if (host === undefined || (extra.length > 0 && !json)) throw ADMIN_ERRORS.usage();
  if (!isIdOf('host', host)) throw ADMIN_ERRORS.notHostId();
  if (verb === 'drain') {
    if (d.engine !== 'postgres') throw ADMIN_ERRORS.drainNeedsPostgres();
    const from = await d.drain.headSeq();
    const moved = await d.hosts.operate(host, 'drain');
    if (!moved.ok) throw 'from' in moved ? ADMIN_ERRORS.refused(host, moved.reason) : ADMIN_ERRORS.noSuchHost(host);
    await followDrain(host, moved.from, from, d, (l) => d.out(json ? JSON.stringify(l) : drainText(l)));
    return 0;
  }
  const moved = await d.hosts.operate(host, verb);
  if (!moved.ok) throw 'from' in moved ? ADMIN_ERRORS.refused(host, moved.reason) : ADMIN_ERRORS.noSuchHost(host);
  d.out(moved.changed ? `${host}: ${moved.to} (was ${moved.from})` : `${host}: already ${moved.to}`);
  return 0;
}

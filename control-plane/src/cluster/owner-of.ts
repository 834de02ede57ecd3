/**
 * Who serves a machine, from the store (issue 24 item 5; docs/cluster.md, "Who owns a machine"): the machine's
 * `host_id`, that host's row, and who drives it. The host's driver registers, at each takeover, where it takes
 * forwarded requests and which process it is: `internal_url` is `http://<INTERNAL_HOST>:<port>/<process id>`
 * (`registeredUrl`), so a takeover by another process changes both at once, in the same compare-and-set as the epoch.
 *
 * | host row              | its registered process                  | owner                              |
 * |-----------------------|-----------------------------------------|------------------------------------|
 * | missing               | —                                       | unavailable (503)                  |
 * | down                  | any                                     | unavailable (503)                  |
 * | active/cordoned/drain.| this process, and it drives the host now| local                              |
 * | active/cordoned/drain.| this process, but it no longer drives   | unavailable (503: a takeover is on)|
 * | active/cordoned/drain.| another process                         | remote, at the registered address  |
 * | active/cordoned/drain.| none registered (or unreadable)         | unavailable (503)                  |
 *
 * A machine with `host_id` NULL (recorded before hosts existed) is on the deployment's only host (the driver's
 * takeover adopts those); with several hosts and no host_id, unavailable. "Unavailable" rejects `OwnerOf`, which
 * `route` (forward/owner.ts) answers as its retryable 503 without naming a host.
 */
import { randomBytes } from 'node:crypto';
import type { HostState } from '../domain/host-states.js';
import type { HostRow, MachineHost } from '../store/repos/hosts.js';
import type { Owner, OwnerOf } from './forward/owner.js';

/** Who the host's registered process is, seen from this process. */
export type DriverSeen = 'self' | 'self-stale' | 'other' | 'none';
export type OwnerDecision = 'local' | 'remote' | 'unavailable';

export const OWNER_DECISIONS: Readonly<Record<HostState | 'missing', Readonly<Record<DriverSeen, OwnerDecision>>>> = {
  missing: { self: 'unavailable', 'self-stale': 'unavailable', other: 'unavailable', none: 'unavailable' },
  down: { self: 'unavailable', 'self-stale': 'unavailable', other: 'unavailable', none: 'unavailable' },
  active: { self: 'local', 'self-stale': 'unavailable', other: 'remote', none: 'unavailable' },
  cordoned: { self: 'local', 'self-stale': 'unavailable', other: 'remote', none: 'unavailable' },
  draining: { self: 'local', 'self-stale': 'unavailable', other: 'remote', none: 'unavailable' },
};

/** A per-process id, random at each start: what the channel signs for (forward/signature.ts's ProcessId format). */
export function newProcessId(): string {
  return `cp-${randomBytes(12).toString('hex')}`;
}

const PROCESS_ID = /^cp-[0-9a-f]{24}$/;

/** What a driver registers as the host's internal URL: its listener and its process id. */
export function registeredUrl(listener: string, processId: string): string {
  return `${listener}/${processId}`;
}

/** The listener and process a registered URL names; null for anything else (never trusted unparsed). */
export function parseRegisteredUrl(text: string | null): { address: string; processId: string } | null {
  if (text === null || text.length > 300) return null;
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return null;
  }
  const processId = u.pathname.slice(1);
  if (u.protocol !== 'http:' || !u.port || !PROCESS_ID.test(processId) || u.search || u.hash || u.username || u.password) return null;
  return { address: `http://${u.host}`, processId };
}

/** The decision for `host` (undefined: no such row) seen by process `self`, which drives it now or not. */
export function decideOwner(host: Pick<HostRow, 'state' | 'internal_url'> | undefined, self: { processId: string; driving: boolean }): Owner | null {
  const reg = host ? parseRegisteredUrl(host.internal_url) : null;
  const seen: DriverSeen = !reg ? 'none' : reg.processId !== self.processId ? 'other' : self.driving ? 'self' : 'self-stale';
  const d = OWNER_DECISIONS[host?.state ?? 'missing'][seen];
  if (d === 'local') return { kind: 'local' };
  if (d === 'remote' && reg) return { kind: 'remote', processId: reg.processId, address: reg.address };
  return null;
}

export class OwnerUnavailable extends Error {
  override name = 'OwnerUnavailable';
}

export interface OwnerLookups {
  /** The live machine's host id and that host's row, in one round trip (store/repos/hosts.ts `ofMachine`); undefined for no such live machine. */
  machineHost(machineId: string): Promise<MachineHost | undefined>;
  host(hostId: string): Promise<HostRow | undefined>;
  /** Every host's id (for a machine with no host_id: the only one). */
  hostIds(): Promise<string[]>;
}

export interface OwnerSelf {
  processId: string;
  /** Whether this process drives its host now (holds the fence). */
  driving(): boolean;
}

/** `decideOwner` seen by `self` now; throws OwnerUnavailable when nobody can serve the host. */
function ownerSeen(host: Pick<HostRow, 'state' | 'internal_url'> | undefined, self: OwnerSelf): Owner {
  const owner = decideOwner(host, { processId: self.processId, driving: self.driving() });
  if (!owner) throw new OwnerUnavailable('no process serves the host now');
  return owner;
}

/** The owner of host `hostId`: rejects (OwnerUnavailable) when nobody can serve it now. */
export function ownerOfHost(l: Pick<OwnerLookups, 'host'>, self: OwnerSelf): (hostId: string) => Promise<Owner> {
  return async (hostId) => ownerSeen(await l.host(hostId), self);
}

/**
 * `OwnerOf` from the store: the machine and its host read together (one round trip; this check runs on every machine
 * request, on the driver too). A machine that does not exist is served here: the handler answers its 404 exactly as
 * for any other process (nothing to forward to).
 */
export function ownerOfFromStore(l: OwnerLookups, self: OwnerSelf): OwnerOf {
  const ofHost = ownerOfHost(l, self);
  return async (machineId) => {
    const on = await l.machineHost(machineId);
    if (on === undefined) return { kind: 'local' };
    if (on.hostId !== null) return ownerSeen(on.host, self);
    const ids = await l.hostIds();
    if (ids.length !== 1) throw new OwnerUnavailable('a machine with no host among several hosts');
    return ofHost(ids[0]!);
  };
}

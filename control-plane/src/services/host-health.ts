/**
 * The host's disk under DATA_DIR (the database, the substrate's layers and machine disks). Below a reserve,
 * new work that would write (create, start, fork, snapshots) is refused early with a retryable 503, so the
 * volume never fills under running machines because of new work; on entering the low state every live machine's
 * log gets `host.unhealthy {reason: disk_low}` (the spec's event for the organizations with machines here),
 * and again only after space came back and ran low once more. The same event with `reason:
 * substrate_unavailable` when the substrate stops answering, and `reason: disk_read_only` when the machines' disk
 * volume went read-only (new work refused too, until the machine service brought the volume back).
 */
import fs from 'node:fs';
import type { Store } from '../store/store.js';
import type { EventService } from './events.js';
import { ERRORS } from '../errors.js';

const MiB = 1024 * 1024;

export interface HostHealthDeps {
  store: Store;
  events: EventService;
  /** The directory whose filesystem is watched (DATA_DIR). */
  dir: string;
  /** This DATA_DIR's host (PostgreSQL): only its machines are told; null: every machine is on the one host. */
  hostId: string | null;
  /** Free space kept in reserve; default 5% of the filesystem, at least 256 MiB and at most 2 GiB. */
  reserveBytes?: number;
  /** How the free space is read (tests); default statfs. */
  statfs?: (dir: string) => { free: number; total: number };
}

function statfs(dir: string): { free: number; total: number } {
  const s = fs.statfsSync(dir);
  return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
}

export function defaultReserve(total: number): number {
  return Math.min(2048 * MiB, Math.max(256 * MiB, Math.floor(total * 0.05)));
}

export function createHostHealth(d: HostHealthDeps) {
  const read = d.statfs ?? statfs;
  let low = false;
  let substrateDown = false;
  let readOnly = false;

  /** host.unhealthy to every live machine's log on this host (the organizations with machines here, never another host's). */
  function tellEveryone(reason: 'disk_low' | 'substrate_unavailable' | 'disk_read_only'): Promise<void> {
    const live = ['creating', 'starting', 'running', 'stopping', 'stopped', 'error'] as const;
    return d.store.db.tx(async () => {
      for (const m of d.hostId ? await d.store.machines.onHost(d.hostId, live) : await d.store.machines.inStates(live)) {
        await d.events.append(m.org_id, m.id, 'host.unhealthy', { reason });
      }
    });
  }

  function isLow(dir = d.dir): boolean {
    let s: { free: number; total: number };
    try {
      s = read(dir);
    } catch {
      return false;
    }
    return s.free < (d.reserveBytes ?? defaultReserve(s.total));
  }

  return {
    /**
     * Security gate / invariant: called before recording new work that writes to the host's disk, so one
     * tenant's creates cannot take the last of the space the running machines (and the database) need.
     */
    checkReserve(): void {
      if (readOnly) {
        throw ERRORS.hostDisksReadOnly();
      }
      if (!isLow()) return;
      // No figures in the message: they would tell a tenant about the host.
      throw ERRORS.hostLowDiskSpace();
    },

    /** One check (the substrate watch runs it): on entering the low state, host.unhealthy to every live machine. */
    async check(): Promise<boolean> {
      const now = isLow();
      // The flag moves before the events are recorded, so a second check meanwhile does not tell twice.
      const entered = now && !low;
      low = now;
      if (entered) await tellEveryone('disk_low');
      return now;
    },

    /** Whether the filesystem holding `dir` (a loop volume's backing file) has its reserve free. */
    hasRoom(dir: string): boolean {
      return !isLow(dir);
    },

    /** The machines' disk volume is read-only (or not): host.unhealthy {reason: disk_read_only} once per episode. */
    async volumeReadOnly(ro: boolean): Promise<void> {
      const entered = ro && !readOnly;
      readOnly = ro;
      if (entered) await tellEveryone('disk_read_only');
    },

    /**
     * The substrate answered (true) or did not (false: it failed to prepare, or every running machine's probe
     * failed in one watch pass): host.unhealthy {reason: substrate_unavailable} once per episode.
     */
    async substrateAnswered(ok: boolean): Promise<void> {
      const entered = !ok && !substrateDown;
      substrateDown = !ok;
      if (entered) await tellEveryone('substrate_unavailable');
    },
  };
}
export type HostHealth = ReturnType<typeof createHostHealth>;

/**
 * The arriving side's memory of who drives a machine (docs/cluster.md, "The owner cache"): a process that forwarded
 * a machine's request to another process remembers that process for `OWNER_CACHE_MS` (default one second), so the
 * next request of a busy caller skips the owner lookup (two PostgreSQL round trips) before it forwards.
 *
 * Only *remote* owners are remembered, and only to forward to: whether this process serves a machine itself is
 * always read fresh from the store, so a stale entry can never make this process act on a machine. A stale remote
 * entry is safe because the process it names checks afresh (api/middleware/owner-route.ts): if it no longer drives
 * the machine's host, it refuses before doing anything, marked for the sender (`OWNER_REFUSED_HEADER`), and the
 * sender forgets the entry and routes once more from the store; an entry naming a process that is gone fails before
 * its connection opens, with the same outcome.
 */
import type { RemoteOwner } from './forward/owner.js';

/** Entries kept at most; the oldest goes first past it (a process forwards for the machines its callers name). */
const MAX_ENTRIES = 10_000;

export interface OwnerCache {
  /** The remote owner remembered for `machineId`, if remembered less than the cache's time ago. */
  get(machineId: string): RemoteOwner | null;
  /** Remembers that `owner` drove `machineId` just now (read from the store). */
  set(machineId: string, owner: RemoteOwner): void;
  /** Forgets `machineId` (its remembered owner refused it or could not be reached). */
  delete(machineId: string): void;
}

export function ownerCache(o: { ttlMs: number; now?: () => number; maxEntries?: number }): OwnerCache {
  const now = o.now ?? (() => performance.now());
  const max = o.maxEntries ?? MAX_ENTRIES;
  const entries = new Map<string, { owner: RemoteOwner; at: number }>();
  return {
    get(machineId) {
      const e = entries.get(machineId);
      if (!e) return null;
      if (now() - e.at < o.ttlMs) return e.owner;
      entries.delete(machineId);
      return null;
    },
    set(machineId, owner) {
      if (o.ttlMs <= 0) return;
      entries.delete(machineId);
      entries.set(machineId, { owner, at: now() });
      for (const oldest of entries.keys()) {
        if (entries.size <= max) break;
        entries.delete(oldest);
      }
    },
    delete(machineId) {
      entries.delete(machineId);
    },
  };
}

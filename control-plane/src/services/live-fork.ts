/**
 * A fork of a machine's disk as it is now, made on another host than the parent's (issue 25 items 2 and 4;
 * docs/cluster.md, "Where a fork goes"). Placement ranks a live fork like a create, the parent's host first when it
 * fits (services/placement.ts `forkHosts`); when another host is chosen, that host's fork (machines/create.ts),
 * after recording the fork `creating`:
 *
 * 1. asks the parent's host to capture the parent's disk live, in place, the layer pinned by `forkHolder(fork)` on
 *    that host (a host call to its driver, the move route `fork_capture`: services/move-acts.ts);
 * 2. pulls the chain here with the services' layer puller (once, SHA-256 checked), pinned by the fork's id here;
 * 3. makes the fork's disk on it and starts it; then lets its own pin go;
 * 4. asks the parent's host to let the capture's pin go (`fork_release`), whether the fork ran or failed.
 *
 * A pin `fork_<fork>` is never left for good: while the fork is `creating` the pin is kept (its host may still be
 * pulling it); once the fork is anything else, or deleted, the parent host's pin sweep (snapshots.ts `sweepPins`,
 * at every reconcile and every few minutes) releases it. A crash of the fork's host between the steps leaves the
 * fork `creating`, which that host's reconcile settles to `error` (its disk absent: "clear an interrupted create"),
 * or host loss does; nothing half-made is ever recorded running.
 */
import { isIdOf } from '../../../shared/ids.js';

/** Asking the parent's host (its driver, over host calls: cluster/machine-move.ts `createParentDisk`). */
export interface ParentDisk {
  /** Captures `parent`'s disk on `hostId`, pinned there for `fork`; the chain to pull (a layer id, no host path). */
  capture(hostId: string, parent: string, fork: string): Promise<{ chain: string }>;
  /** Releases on `hostId` the capture's pin held for `fork` (nothing there: nothing done). */
  release(hostId: string, parent: string, fork: string): Promise<void>;
}

/** The pin holder of a live fork's capture on its parent's host. */
export const forkHolder = (fork: string): string => `fork_${fork}`;

/** The fork a live fork's capture pin is held for, or null for any other holder. */
export function forkOfHolder(holder: string): string | null {
  return holder.startsWith('fork_') && isIdOf('machine', holder.slice(5)) ? holder.slice(5) : null;
}

/** Whether a live fork's capture pin must stay: only while its fork is still being made. */
export const forkPinKept = (forkState: string | undefined): boolean => forkState === 'creating';

/**
 * When a host is down (pure): its driver heartbeats every HOST_HEARTBEAT_MS; a host whose last heartbeat is
 * HOST_DOWN_AFTER_MS old or older (four missed heartbeats) is down. The deployment leader sweeps every HOST_SWEEP_MS
 * (cluster/jobs.ts, the `hosts` job), so a host is declared down, its machines `error`, at most HOST_LOSS_WITHIN_MS
 * after its last heartbeat (9 s: the target is 10 s from a kill, and a kill comes after the last heartbeat). Both instants come from the database's clock
 * (store/repos/hosts.ts reads them in one statement), so clocks that differ between hosts cannot declare a live
 * host down. A host with no heartbeat at all (registered, never driven) is down once its row is that old.
 */
import type { HostState } from './host-states.js';

export const HOST_HEARTBEAT_MS = 2_000;
export const HOST_DOWN_AFTER_MS = 8_000;
/** The deployment leader's down sweep period. */
export const HOST_SWEEP_MS = 1_000;
/** The worst case from a host's last heartbeat to its machines in `error` (plus the sweep's own transaction). */
export const HOST_LOSS_WITHIN_MS = HOST_DOWN_AFTER_MS + HOST_SWEEP_MS;

export interface HostSeen {
  state: HostState;
  /** Epoch milliseconds of the last heartbeat; null: never. */
  heartbeatMs: number | null;
  createdMs: number;
}

export type LivenessDecision = { down: false; reason: 'already_down' | 'alive' } | { down: true; reason: 'heartbeat_stale' | 'never_heartbeat'; silentMs: number };

export function decideLiveness(host: HostSeen, nowMs: number, downAfterMs = HOST_DOWN_AFTER_MS): LivenessDecision {
  if (host.state === 'down') return { down: false, reason: 'already_down' };
  const since = host.heartbeatMs ?? host.createdMs;
  const silentMs = nowMs - since;
  if (silentMs < downAfterMs) return { down: false, reason: 'alive' };
  return { down: true, reason: host.heartbeatMs === null ? 'never_heartbeat' : 'heartbeat_stale', silentMs };
}

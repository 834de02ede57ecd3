/**
 * When a host is down (pure): its driver heartbeats every HOST_HEARTBEAT_MS; a host whose last heartbeat is
 * HOST_DOWN_AFTER_MS old or older (five missed heartbeats) is down. Both instants come from the database's clock
 * (store/repos/hosts.ts reads them in one statement), so clocks that differ between hosts cannot declare a live
 * host down. A host with no heartbeat at all (registered, never driven) is down once its row is that old.
 */
import type { HostState } from './host-states.js';

export const HOST_HEARTBEAT_MS = 2_000;
export const HOST_DOWN_AFTER_MS = 10_000;

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

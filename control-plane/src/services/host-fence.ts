/**
 * The fence this process's machine state writes carry (issue 25 item 5): the epoch its host driver's takeover made
 * (cluster/host-driver.ts). The driver's work calls `hold(fence)` when it starts; from then on every machine state
 * write of the machine service carries `drivenUnder(fence)` (store/repos/hosts.ts), so once the host is declared
 * down or another driver takes over, an operation still in flight here changes no row.
 *
 * A fence is never let go, only replaced by the next takeover's: after a driver resigns, the writes it still makes
 * keep the old fence and so write nothing. A process that never drove a host (SQLite, one process; or a process
 * whose driver is not wired) holds none: its writes carry no condition.
 */
import type { HostFence } from '../store/repos/hosts.js';

export interface HostFenceHolder {
  /** The fence of this process's latest takeover; null: it never drove a host. */
  readonly current: HostFence | null;
  hold(fence: HostFence): void;
}

export function createHostFence(): HostFenceHolder {
  let current: HostFence | null = null;
  return {
    get current() {
      return current;
    },
    hold(fence) {
      current = { ...fence };
    },
  };
}

/**
 * Host loss (issue 25 item 5; the decisions are domain/host-loss.ts, the rule is docs/operations.md "Losing a host").
 *
 * - `sweepLostHosts`: the deployment leader's pass (cluster/jobs.ts, `hosts`): every silent host is marked down
 *   (store/repos/hosts.ts `sweepDown`, its epoch bumped so its driver is fenced off) and, in the same transaction,
 *   its machines are failed: `host.unhealthy {reason: host_lost}` on each live machine, and each one the lifecycle
 *   table lets fail moves to `error` with `machine.failed {…, reason: host_lost}`, its input lease released. Each move
 *   is a compare-and-set on the state read, so a machine is failed once. These writes are the deployment's, not a
 *   driver's: they carry no fence.
 * - `recoverAfterHostLoss(fence)`: what the host's driver does when it takes over again (the driver's work calls it
 *   at start, before the reconcile): machines still recorded on the host, `error` because the host was lost, are
 *   settled by HOST_RETURN, each write fenced by the new takeover's epoch and the machine's host, so a machine moved
 *   elsewhere meanwhile, or a driver replaced again, changes nothing.
 */
import type { MachineState } from '../../../../shared/schemas/machine.js';
import { decide } from '../../domain/machine-lifecycle.js';
import { failedWithHost, HOST_LOST, HOST_RETURN, HOST_RETURNED, hostLostEvent } from '../../domain/host-loss.js';
import { HOST_DOWN_AFTER_MS } from '../../domain/host-liveness.js';
import type { HostFence } from '../../store/repos/hosts.js';
import type { MachineRow } from '../../store/repos/machines.js';
import type { SubstrateStatus } from '../../substrate/substrate.js';
import { SYSTEM } from '../actor.js';
import type { MachineCore } from './core.js';

/** A machine's fail lost to a concurrent move this many times in a row is read and decided again, then left. */
const FAIL_ATTEMPTS = 5;

export interface LostHost {
  hostId: string;
  /** The machines moved to `error`, with the state each was in. */
  failed: Array<{ id: string; from: MachineState }>;
}

export type RecoveryResult = Array<{ id: string; to: 'stopped' | 'error' }>;

export function createHostLoss(c: MachineCore) {
  const { d } = c;
  const { store, substrate, events, locks } = d;

  /** Fails `m` (read in this transaction), deciding again on the state it is in if a concurrent move won. */
  async function failOne(m: MachineRow, hostId: string): Promise<MachineState | null> {
    let row: MachineRow | undefined = m;
    for (let attempt = 1; row && row.host_id === hostId && attempt <= FAIL_ATTEMPTS; attempt++) {
      const from = row.state;
      const dec = decide(from, 'fail');
      if (!dec.ok) return null;
      if (await store.machines.casState(row.id, from, dec.to, c.at())) {
        await d.leases.releaseInTx(row.org_id, row.id, 'machine_failed', SYSTEM);
        await events.append(row.org_id, row.id, 'machine.failed', hostLostEvent(from));
        return from;
      }
      row = await store.machines.byId(row.id);
    }
    return null;
  }

  /** Inside the transaction that marked `hostId` down. */
  async function failMachinesOf(hostId: string): Promise<LostHost> {
    const out: LostHost = { hostId, failed: [] };
    for (const m of await store.machines.onHost(hostId)) {
      await events.append(m.org_id, m.id, 'host.unhealthy', { reason: HOST_LOST });
      const from = await failOne(m, hostId);
      if (from) out.failed.push({ id: m.id, from });
    }
    return out;
  }

  /** Settles one machine the returning host lost; the answer for the result, null: not this host's to settle. */
  async function settleReturned(m: MachineRow, fence: HostFence): Promise<'stopped' | 'error' | null> {
    const failed = await store.events.newestOfType(m.id, 'machine.failed');
    if (!failed || !failedWithHost(JSON.parse(failed.data) as Record<string, unknown>)) return null;
    let seen: SubstrateStatus;
    try {
      seen = await substrate.status(m.id);
    } catch (e) {
      d.onFailure?.(m.id, 'host_return', e);
      return 'error';
    }
    const act = HOST_RETURN[seen];
    if (act.do === 'keep_error') return 'error';
    if (act.stopFirst) {
      try {
        await locks.run(m.id, () => substrate.stop(m.id));
      } catch (e) {
        d.onFailure?.(m.id, 'host_return', e);
        return 'error';
      }
    }
    const moved = await store.db.tx(async () => {
      // The same failure still stands (no start, fail and fail again since it was read).
      if ((await store.events.newestOfType(m.id, 'machine.failed'))?.id !== failed.id) return false;
      if (!(await store.machines.casState(m.id, 'error', c.decideTo('error', 'host_returned'), c.at(), fence))) return false;
      await events.append(m.org_id, m.id, 'machine.stopped', { from: 'error', to: 'stopped', by: SYSTEM, reason: HOST_RETURNED });
      return true;
    });
    return moved ? 'stopped' : null;
  }

  return {
    /** The leader's pass: marks silent hosts down and fails their machines, one transaction per host. */
    async sweepLostHosts(downAfterMs = HOST_DOWN_AFTER_MS): Promise<LostHost[]> {
      const out: LostHost[] = [];
      await store.hosts.sweepDown(downAfterMs, async (h) => void out.push(await failMachinesOf(h.id)));
      return out;
    },

    /**
     * A returning driver's settling of what its host's loss left (see the header); the driver's work calls it at
     * start with its new fence. Returns the machines it looked at and where each rests.
     */
    async recoverAfterHostLoss(fence: HostFence): Promise<RecoveryResult> {
      const out: RecoveryResult = [];
      for (const m of await store.machines.onHost(fence.hostId, ['error'])) {
        const to = await settleReturned(m, fence);
        if (to) out.push({ id: m.id, to });
      }
      return out;
    },
  };
}

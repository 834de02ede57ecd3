/**
 * Read-only-volume recovery: the machines' disk volume, checked in each watch pass. While it is read-only new
 * work is refused (host health, which also tells every organization once). Once the filesystem under a loop
 * volume has its reserve back, the volume is recovered: the running machines are stopped, the volume is
 * mounted again, and they are started again.
 */
import { SYSTEM } from '../actor.js';
import type { MachineCore } from './core.js';
import type { HostStarts } from './host-starts.js';

export function createDiskVolumeRecovery(c: MachineCore, host: HostStarts) {
  const { d } = c;
  const { store, substrate, locks } = d;

  // Machines a disk-volume recovery stopped and owes a start live in the store (volume_restarts): recorded with
  // the decision to stop them, so a control plane killed before the volume is back still starts them.
  let recovering = false;

  /**
   * Bring a read-only volume back (the kernel forced it read-only when its backing filesystem filled; btrfs
   * cannot be made writable again without a new mount). Decide and record: every running machine is `stopping`
   * (its guest cannot write anyway) and remembered; act: each is stopped (`machine.stopped {reason:
   * disk_read_only}`), the substrate mounts the volume again, and the remembered machines are started again.
   */
  async function recoverDiskVolume(): Promise<void> {
    const victims = await store.db.tx(async () => {
      const running = await store.machines.inStates(['running']);
      for (const m of running) {
        await c.transition(m, 'stop');
        await d.leases.releaseInTx(m.org_id, m.id, 'machine_stopped', SYSTEM);
        await store.volumeRestarts.add(m.id);
      }
      return running;
    });
    await Promise.all(victims.map(async (m) => {
      d.agent.drop(m.id);
      try {
        await locks.run(m.id, () => substrate.stop(m.id, { timeoutMs: 5_000 }));
      } catch (e) {
        await c.fail(m, 'stopping', 'stop', e);
        return;
      }
      d.agent.drop(m.id);
      // One transaction: the stop and when it happened (what restartRecovered compares) are recorded together.
      await store.db.tx(async () => {
        if (await c.settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by: SYSTEM, reason: 'disk_read_only' })) {
          await store.volumeRestarts.stopped(m.id, (await store.machines.byId(m.id))!.state_changed_at);
        }
      });
    }));
    try {
      await substrate.remountDiskVolume();
    } catch (e) {
      // Still read-only: the next pass tries again; the stopped machines wait (they are stopped, honestly).
      d.onFailure?.('*', 'volume_remount', e);
      return;
    }
    await d.hostHealth?.volumeReadOnly(false);
    await restartRecovered();
  }

  /** Start again the machines a recovery stopped: `machine.started {reason: host_recovered}`. */
  async function restartRecovered(): Promise<void> {
    const owed = await store.volumeRestarts.all();
    await Promise.all(owed.map(async (r) => {
      // Only a machine still as the recovery left it: a user who started, stopped or deleted it meanwhile wins
      // (`stopped_at` NULL: killed before the stop was recorded; the reconciler settled it stopped since).
      // Its compute was held until the recovery stopped it, so no quota or capacity is asked again.
      const m = await store.db.tx(async () => {
        await store.volumeRestarts.forget(r.machine_id);
        const now = await store.machines.byId(r.machine_id);
        if (!now || now.deleted_at || now.state !== 'stopped' || (r.stopped_at !== null && now.state_changed_at !== r.stopped_at)) return null;
        await c.transition(now, 'start');
        return now;
      });
      if (m) await host.systemStart(m, 'host_recovered');
    }));
  }

  /** One check of the volume (each watch pass). Returns whether a recovery ran. */
  return async function watchDiskVolume(): Promise<boolean> {
    if (recovering) return false;
    // Taken before the first await: a second check meanwhile steps aside, as it did while a recovery ran.
    recovering = true;
    try {
      const vol = substrate.diskVolume();
      await d.hostHealth?.volumeReadOnly(vol?.readOnly === true);
      if (!vol || (!vol.readOnly && !(await store.volumeRestarts.any()))) return false;
      if (vol.readOnly && (vol.backingDir === null || !(d.hostHealth?.hasRoom(vol.backingDir) ?? true))) return false;
      // Acts in flight (a create, start, stop or delete decided before the volume failed) finish first.
      if ((await store.machines.inStates(['creating', 'starting', 'stopping', 'deleting'])).length) return false;
      if (vol.readOnly) await recoverDiskVolume();
      else await restartRecovered();
      return true;
    } finally {
      recovering = false;
    }
  };
}

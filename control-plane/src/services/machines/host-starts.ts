/**
 * Starts the host (not a user) decides to keep a machine running: after a host reboot lost it (the
 * reconciler) and after a disk-volume recovery stopped it.
 */
import { AppError } from '../../../../shared/errors.js';
import type { MachineRow } from '../../store/repos/machines.js';
import { SYSTEM } from '../actor.js';
import type { MachineCore } from './core.js';
import type { Readiness } from './ready.js';

export interface HostStarts {
  systemStart(m: MachineRow, reason: 'host_restart' | 'host_recovered'): Promise<void>;
  recoverLost(m: MachineRow): Promise<boolean>;
}

export function createHostStarts(c: MachineCore, ready: Readiness): HostStarts {
  const { d } = c;
  const { store, substrate, locks } = d;

  /**
   * The act after the host (not a user) recorded a machine `starting` to keep it running: booted →
   * `machine.started {reason}`; a start that fails leaves it `stopped` with `machine.stopped {reason,
   * restarted: false, code}`: the user's intent (running) could not be kept, but nothing is broken that a
   * start could not fix.
   */
  async function systemStart(m: MachineRow, reason: 'host_restart' | 'host_recovered'): Promise<void> {
    try {
      await locks.run(m.id, () => substrate.start(m.id));
    } catch (e) {
      d.onFailure?.(m.id, 'recover', e);
      const code = e instanceof AppError ? e.code : 'internal_error';
      await c.settle(m, 'starting', 'abandon', 'machine.stopped', { by: SYSTEM, reason, restarted: false, code });
      return;
    }
    if (await c.settle(m, 'starting', 'boot_complete', 'machine.started', { by: SYSTEM, reason })) ready.watchReady(m);
  }

  return {
    systemStart,

    /**
     * A machine the user left running that the host lost (a host reboot, or killed while the control plane was
     * down) is started again (`running → starting`, then systemStart with reason `host_restart`).
     * Returns whether it moved the row.
     */
    async recoverLost(m) {
      const moved = await store.db.tx(async () => {
        const now = await store.machines.byId(m.id);
        if (!now || now.state !== 'running' || now.state_changed_at !== m.state_changed_at) return false;
        await c.transition(now, 'recover');
        return true;
      });
      if (!moved) return false;
      d.agent.drop(m.id);
      await systemStart(m, 'host_restart');
      return true;
    },
  };
}

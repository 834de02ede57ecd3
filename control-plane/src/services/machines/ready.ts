/**
 * Display readiness: after every boot, the boot listeners run, then (in the background) the agent's /display
 * is polled until the desktop answers and `machine.ready` is recorded once.
 */
import { AppError } from '../../../../shared/errors.js';
import { agentOf } from '../machine-agent/index.js';
import type { MachineRow } from '../../store/repos/machines.js';
import type { MachineCore } from './core.js';

/** The ready probe when none is configured (also how long a moved machine's agent is waited for: services/move-acts.ts). */
export const DEFAULT_READY_PROBE = { intervalMs: 1_000, timeoutMs: 180_000 };

export interface Readiness {
  /** Run `fn` after every boot of any machine (outside any transaction; must not throw). */
  onBoot(fn: (m: MachineRow) => void): void;
  /** Called once per boot (create, start, restart, restore, reconcile). */
  watchReady(m: MachineRow): void;
}

export function createReadiness(c: MachineCore): Readiness {
  const { d } = c;
  const { store, events } = d;
  const bootListeners: Array<(m: MachineRow) => void> = [];

  return {
    onBoot(fn) {
      bootListeners.push(fn);
    },

    /**
     * After a boot, wait (in the background) for the desktop to answer and record `machine.ready` once.
     * Stops as soon as the machine leaves the state this boot put it in.
     */
    watchReady(m) {
      // Every boot path (create, start, restart, restore, reconcile) ends here, once per boot: the boot
      // listeners (secrets delivery into the fresh tmpfs) run first, whatever the ready probe does.
      for (const fn of bootListeners) {
        try {
          fn(m);
        } catch (e) {
          d.onFailure?.(m.id, 'after_boot', e);
        }
      }
      const probe = d.readyProbe === undefined ? DEFAULT_READY_PROBE : d.readyProbe;
      if (!probe) return;
      // Read now (the query is queued at once): the boot this call is for, not a later one.
      const booted = store.machines.byId(m.id).then(
        (r) => r?.state_changed_at,
        () => undefined,
      );
      const deadline = Date.now() + probe.timeoutMs;
      const tick = async () => {
        const bootedAt = await booted;
        const now = await store.machines.byId(m.id);
        if (!now || now.state !== 'running' || now.state_changed_at !== bootedAt || Date.now() > deadline) return;
        let up = false;
        try {
          up = (await d.agent.call(agentOf(now), 'display.get', { timeoutMs: Math.max(probe.intervalMs, 2_000) })).up;
        } catch (e) {
          if (e instanceof AppError && /shutting down/.test(e.message)) return;
        }
        if (up) {
          await store.db.tx(async () => {
            const again = await store.machines.byId(m.id);
            if (again && again.state === 'running' && again.state_changed_at === bootedAt) await events.append(m.org_id, m.id, 'machine.ready', {});
          });
          return;
        }
        setTimeout(() => void tick().catch(() => {}), probe.intervalMs).unref?.();
      };
      // The watcher must never take the process down (e.g. the store closed during shutdown).
      const safeTick = () => tick().catch(() => {});
      setTimeout(safeTick, 0).unref?.();
    },
  };
}

/** Billing stops: every running machine of an organization whose account stopped granting compute is stopped and captured. */
import { SYSTEM } from '../actor.js';
import type { MachineCore } from './core.js';
import type { LifecycleActs } from './lifecycle.js';

export function createBillingStops(c: MachineCore, acts: LifecycleActs) {
  const { d } = c;
  const { store } = d;

  /** Stops every running machine of an organization whose account stopped granting compute. */
  return async function stopAllFor(orgId: string): Promise<void> {
    const running = (await store.machines.inStates(['running'])).filter((m) => m.org_id === orgId);
    for (const m of running) {
      try {
        const moved = await store.db.tx(async () => {
          const now = await store.machines.byId(m.id);
          if (!now || now.state !== 'running') return false;
          await c.transition(now, 'stop');
          await d.leases.releaseInTx(m.org_id, m.id, 'billing', SYSTEM);
          return true;
        });
        if (!moved) continue;
        await acts.runStop(m, 'stop', SYSTEM);
        // The spec: machines stopped by the billing state keep their disks captured. Taken after the clean
        // shutdown (a consistent disk), without the snapshot quota (the account grants nothing now).
        const snap = await store.db.tx(async () => {
          const now = await store.machines.byId(m.id);
          return now && now.state === 'stopped' ? d.snapshots.beginInTx(now, 'stop', 'Stopped by billing', SYSTEM, { admit: 'system' }) : null;
        });
        if (snap) await d.snapshots.capture(snap);
      } catch (e) {
        d.onFailure?.(m.id, 'billing_stop', e);
      }
    }
  };
}

/** Restore a machine onto one of its snapshots (the current disk captured first, a running machine rebooted). */
import { AppError } from '../../../../shared/errors.js';
import type { Machine } from '../../../../shared/schemas/machine.js';
import type { RestoreMachineRequest } from '../../../../shared/schemas/snapshot.js';
import type { OrgPrincipal } from '../../context.js';
import { conflictMessage, decide } from '../../domain/machine-lifecycle.js';
import type { MachineRow } from '../../store/repos/machines.js';
import { actorOf } from '../actor.js';
import type { Actor } from '../events.js';
import type { MachineCore } from './core.js';
import type { Readiness } from './ready.js';
import { ERRORS } from '../../errors.js';

export function createRestore(c: MachineCore, ready: Readiness) {
  const { d } = c;
  const { store, substrate, events, locks } = d;

  /** Inside the machine's disk lock: a machine stopped for a restore is started again (stopping → running). */
  async function bootAfterRestore(m: MachineRow, by: Actor): Promise<void> {
    const go = await store.db.tx(async () => {
      if (!(await c.settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by }))) return false;
      await c.transition((await store.machines.byId(m.id))!, 'start');
      return true;
    });
    if (!go) throw await c.raced(m.id);
    try {
      await substrate.start(m.id);
    } catch (e) {
      await c.fail(m, 'starting', 'restore', e);
      throw ERRORS.machineFailedStartAfterRestore();
    }
    if (!(await c.settle(m, 'starting', 'boot_complete', 'machine.started', { by }))) throw await c.raced(m.id);
    ready.watchReady(m);
  }

  return {
    /**
     * Restore onto one of the machine's snapshots. Refused while any session holds the input lease. The current
     * disk is captured first ("Before restore", origin stop: the restore stops the machine and captures it; taken
     * even at the snapshot limit, since the spec's only condition is the lease, and counted from then on); a
     * running machine is stopped, gets the restored disk and is started again; a stopped one boots into it at its
     * next start. Open agent connections drop (the gateway ends screen and terminal streams on
     * machine.restore_started).
     */
    async restore(p: OrgPrincipal, id: string, req: RestoreMachineRequest): Promise<Machine> {
      const orgId = p.org_id;
      const by = actorOf(p);
      // Layers another host holds are brought here before anything is decided (services/layer-pull.ts).
      await d.snapshots.bringReady(orgId, req.snapshot_id, (await c.load(orgId, id)).id);
      const { m, target, before } = await store.db.tx(async () => {
        const m = await c.load(orgId, id);
        const dec = decide(m.state, 'restore');
        if (!dec.ok) throw ERRORS.machineStateConflict(conflictMessage(m.state, 'restore'));
        const target = await d.snapshots.readyOfMachineInTx(orgId, m.id, req.snapshot_id);
        // Someone is driving the desktop: restoring under them would pull the disk from beneath their work.
        const lease = await store.leases.get(m.id);
        if ((await d.leases.isHeld(m.id)) && lease?.session_id) {
          throw ERRORS.leaseBlocksRestore(lease.session_id, [{ field: 'snapshot_id', message: `input lease held by ${lease.session_id}` }]);
        }
        await events.append(orgId, m.id, 'machine.restore_started', { snapshot_id: target.id, from: m.state, by });
        const before = await d.snapshots.beginInTx(m, 'stop', 'Before restore', by, { admit: 'subscription' });
        await c.transition(m, 'restore');
        return { m, target, before };
      });
      const wasRunning = m.state === 'running';
      await d.snapshots.holding(m.id, () =>
        locks.run(m.id, async () => {
          let stage = 'stop';
          try {
            await substrate.pinLayer(target.layer_id, m.id);
            if (wasRunning) {
              d.agent.drop(m.id);
              await substrate.stop(m.id);
              d.agent.drop(m.id);
            }
            stage = 'capture';
            const saved = await d.snapshots.captureNow(before);
            if (saved.state !== 'ready') throw ERRORS.diskNotCaptured();
            stage = 'replace';
            await substrate.replaceDisk(m.id, { kind: 'layer', layerId: target.layer_id });
          } catch (e) {
            d.onFailure?.(m.id, `restore_${stage}`, e);
            const code = e instanceof AppError ? e.code : 'internal_error';
            await store.db.tx(() => events.append(orgId, m.id, 'machine.restore_failed', { snapshot_id: target.id, stage, code }));
            // Before the disk was replaced nothing is lost: a machine that was running is brought back as it was.
            if (wasRunning) await bootAfterRestore(m, by).catch(() => {});
            throw ERRORS.machineNotRestored();
          } finally {
            await substrate.releaseLayer(target.layer_id, m.id).catch(() => {});
          }
          if (wasRunning) await bootAfterRestore(m, by);
          await store.db.tx(() => events.append(orgId, m.id, 'machine.restore_completed', { snapshot_id: target.id, before_snapshot_id: before.id, by }));
        }),
      );
      return c.current(orgId, m.id);
    },
  };
}

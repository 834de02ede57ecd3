/** The user's lifecycle moves on an existing machine: update, stop, start, restart, delete. */
import { AppError } from '../../../../shared/errors.js';
import type { Machine, UpdateMachineRequest } from '../../../../shared/schemas/machine.js';
import { LOST_HOST } from '../../store/repos/hosts.js';
import type { OrgPrincipal } from '../../context.js';
import { conflictMessage, decide } from '../../domain/machine-lifecycle.js';
import { faultPoint } from '../../fault-points.js';
import type { MachineRow } from '../../store/repos/machines.js';
import { actorOf } from '../actor.js';
import type { Actor } from '../events.js';
import { isPlacementRefusal } from '../placement.js';
import { reserveCompute } from './admission.js';
import type { MachineCore } from './core.js';
import type { Readiness } from './ready.js';
import { ERRORS } from '../../errors.js';
import { conflictOnUnique } from '../../store/unique-violation.js';

/** The acts of a start and a stop, after their decision was recorded (shared with the billing stops). */
export interface LifecycleActs {
  runStart(m: MachineRow, by: Actor): Promise<void>;
  runStop(m: MachineRow, trigger: 'stop' | 'restart', by: Actor): Promise<void>;
}

export function createLifecycleActs(c: MachineCore, ready: Readiness): LifecycleActs {
  const { d } = c;
  const { substrate, locks } = d;
  return {
    async runStart(m, by) {
      try {
        await locks.run(m.id, () => substrate.start(m.id));
      } catch (e) {
        if (e instanceof AppError && e.code === 'not_found') {
          // The host has no disk for it (its create never completed): permanent, so no Retry-After.
          const gone = ERRORS.machineHasNoDisk();
          await c.fail(m, 'starting', 'start', gone);
          throw gone;
        }
        await c.fail(m, 'starting', 'start', e);
        throw ERRORS.machineFailedStart();
      }
      if (!(await c.settle(m, 'starting', 'boot_complete', 'machine.started', { by }))) throw await c.raced(m.id);
      ready.watchReady(m);
    },

    async runStop(m, trigger, by) {
      d.agent.drop(m.id);
      try {
        await locks.run(m.id, () => substrate.stop(m.id));
      } catch (e) {
        await c.fail(m, 'stopping', trigger, e);
        throw ERRORS.machineFailedStop();
      }
      d.agent.drop(m.id);
      if (!(await c.settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by }))) throw await c.raced(m.id);
    },
  };
}

export function createLifecycleMoves(c: MachineCore, acts: LifecycleActs) {
  const { d } = c;
  const { store, substrate, events, locks } = d;
  const { runStart, runStop } = acts;

  /** Records a stop or a restart's stop half and lets go of the input lease, in one transaction. */
  function recordStop(p: OrgPrincipal, id: string, trigger: 'stop' | 'restart', by: Actor): Promise<MachineRow> {
    return store.db.tx(async () => {
      const m = await c.load(p.org_id, id);
      await c.transition(m, trigger);
      await d.leases.releaseInTx(m.org_id, m.id, trigger === 'stop' ? 'machine_stopped' : 'machine_restarted', by);
      return m;
    });
  }

  return {
    update(p: OrgPrincipal, id: string, req: UpdateMachineRequest): Promise<Machine> {
      const orgId = p.org_id;
      return store.db.tx(async () => {
        const m = await c.load(orgId, id);
        if (m.state === 'deleting') throw ERRORS.machineBeingDeleted();
        const name = req.name ?? m.name;
        if (name !== m.name && (await store.machines.nameTaken(orgId, name, m.id))) {
          throw ERRORS.machineNameTaken(name, [{ field: 'name', message: 'already in use' }]);
        }
        const metadata = req.metadata !== undefined ? JSON.stringify(req.metadata) : m.metadata;
        // A rename to the same name in another process between the check and this update (PostgreSQL): the same 409.
        await conflictOnUnique(store.machines.update(m.id, { name, metadata }, c.at()), () => ERRORS.machineNameTaken(name, [{ field: 'name', message: 'already in use' }]));
        await events.append(orgId, m.id, 'machine.updated', {
          fields: [...(req.name !== undefined ? ['name'] : []), ...(req.metadata !== undefined ? ['metadata'] : [])], by: actorOf(p),
        });
        return c.current(orgId, id);
      });
    },

    async stop(p: OrgPrincipal, id: string): Promise<Machine> {
      const by = actorOf(p);
      const m = await recordStop(p, id, 'stop', by);
      await runStop(m, 'stop', by);
      return c.current(p.org_id, id);
    },

    /**
     * A start here; when this host has no room for it, the machine moved to a host with room and started there
     * (services/start-elsewhere.ts), after a start's move of it left open is continued first.
     */
    async start(p: OrgPrincipal, id: string): Promise<Machine> {
      const by = actorOf(p);
      const elsewhere = d.elsewhere?.() ?? null;
      if (elsewhere && (await elsewhere.resume(await c.load(p.org_id, id), by))) return c.current(p.org_id, id);
      const m = await store.db.tx(async () => {
        const m = await c.load(p.org_id, id);
        // Its disk is on a host declared down: no start anywhere until that host returns (docs/operations.md).
        if (m.host_id !== null && (await store.hosts.get(m.host_id))?.state === 'down') throw ERRORS.machineOnLostHost();
        const dec = decide(m.state, 'start');
        if (!dec.ok) throw ERRORS.machineStateConflict(conflictMessage(m.state, 'start'));
        await reserveCompute(c, m.org_id, m.size);
        d.hostHealth?.checkReserve();
        await c.transition(m, 'start');
        return m;
      }).catch(async (e: unknown) => {
        // No room here: moved to a host with room and started there, or the same refusal when no host has room.
        if (!elsewhere || !isPlacementRefusal(e) || !(await elsewhere.start(await c.load(p.org_id, id), by))) throw e;
        return null;
      });
      if (m) await runStart(m, by);
      return c.current(p.org_id, id);
    },

    /** A stop followed by a start; each half is its own compare-and-set. */
    async restart(p: OrgPrincipal, id: string): Promise<Machine> {
      const by = actorOf(p);
      const m = await recordStop(p, id, 'restart', by);
      await runStop(m, 'restart', by);
      await store.db.tx(async () => {
        const now = await c.load(p.org_id, id);
        if (now.state !== 'stopped') throw await c.raced(id);
        // The stop released the machine's room: the start half is admitted like any start.
        await reserveCompute(c, now.org_id, now.size);
        await c.transition(now, 'start');
      });
      await runStart(m, by);
      return c.current(p.org_id, id);
    },

    /**
     * Destroys the disk; its snapshots survive (and keep counting). Allowed from creating, starting and
     * stopping too: the act in flight finishes first (disk lock), then finds the row moved and reports it.
     */
    async remove(p: OrgPrincipal, id: string): Promise<void> {
      const by = actorOf(p);
      const { m, from, lost } = await store.db.tx(async () => {
        const m = await c.load(p.org_id, id);
        const from = m.state;
        // A machine whose host is down (docs/operations.md, "Losing a host"): deleted here and now, its disk left to
        // the host's return, whose reconcile destroys it; every write carries "its host is still down".
        const lost = await c.onLostHost(m);
        await c.transition(m, 'delete', lost ? LOST_HOST : undefined);
        await d.leases.releaseInTx(m.org_id, m.id, 'machine_deleted', by);
        await d.sessions.closeAllInTx(m.org_id, m.id, 'machine_deleted');
        // A machine's secrets go with the decision to delete it, not with its disk.
        await store.secrets.removeAllForMachine(m.id);
        if (lost && (await store.machines.markDeleted(m.id, c.at(), LOST_HOST))) await events.append(m.org_id, m.id, 'machine.deleted', { from, by });
        return { m, from, lost };
      });
      if (lost) return;
      d.agent.drop(m.id);
      try {
        // After whatever act is in flight on the disk (a create, start, stop or capture decided before this).
        await locks.run(m.id, () => {
          faultPoint('machines.delete.before_destroy');
          return substrate.destroy(m.id);
        });
      } catch (e) {
        await c.fail(m, 'deleting', 'delete', e);
        throw ERRORS.machineNotDeleted();
      }
      await store.db.tx(async () => {
        if (await store.machines.markDeleted(m.id, c.at(), c.fence())) await events.append(m.org_id, m.id, 'machine.deleted', { from, by });
      });
    },
  };
}

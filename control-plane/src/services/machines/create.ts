/** New machines: create (on the base disk or a template's) and fork (onto a snapshot or the parent's disk now). */
import type { CreateMachineRequest, Machine, MachineSize } from '../../../../shared/schemas/machine.js';
import type { ForkMachineRequest } from '../../../../shared/schemas/snapshot.js';
import type { OrgPrincipal } from '../../context.js';
import { catalogAt } from '../../domain/catalog.js';
import { faultPoint } from '../../fault-points.js';
import type { MachineRow } from '../../store/repos/machines.js';
import { resourcesForSize, type DiskSource } from '../../substrate/substrate.js';
import { actorOf } from '../actor.js';
import type { Actor } from '../events.js';
import { admitInTx, SIZE_RANK } from './admission.js';
import { poolEligible } from '../../domain/warm-pool.js';
import { machineView, type MachineCore } from './core.js';
import type { Readiness } from './ready.js';
import { ERRORS } from '../../errors.js';
import type { WarmPool } from './warm-pool.js';

export function createMachineCreation(c: MachineCore, ready: Readiness, pool: WarmPool) {
  const { d } = c;
  const { store, substrate, locks } = d;

  /** Whether a machine on `hostId` is on another registered host than this process's. */
  const elsewhere = (hostId: string | null): hostId is string => hostId !== null && d.hostId != null && hostId !== d.hostId;

  /**
   * A live fork's disk from parent `parent` on host `hostId` (services/live-fork.ts): captured there, pinned for
   * `fork`, then its chain pulled here (pinned by `fork`, which the caller holds). The layer's id here.
   */
  async function captureElsewhere(hostId: string, parent: string, fork: string): Promise<string> {
    if (!d.parentDisk) throw ERRORS.liveForkUnconfigured();
    const { chain } = await d.parentDisk.capture(hostId, parent, fork);
    await d.snapshots.bring({ layerId: chain, hostId }, fork);
    return chain;
  }

  /**
   * Act on an admitted machine: create it on the substrate (on `source`) and record that it runs. The row as the
   * outcome stored it (null with start:false: nothing was recorded after the create).
   */
  async function launch(row: MachineRow, source: DiskSource, start: boolean, by: Actor): Promise<MachineRow | null> {
    const resources = resourcesForSize(row.size, catalogAt(d.now(), c.catalog).sizes);
    try {
      await locks.run(row.id, () => {
        faultPoint('machines.create.before_substrate');
        return substrate.create({ id: row.id, resources, source, network: d.network ?? 'none' }, { start });
      });
    } catch (e) {
      if (!start) {
        // Nothing exists on the host: the create did not happen.
        d.onFailure?.(row.id, 'create', e);
        await substrate.destroy(row.id).catch(() => {});
        await store.machines.removeRow(row.id);
        throw ERRORS.machineNotCreated();
      }
      await c.fail(row, 'creating', 'create', e);
      throw ERRORS.machineFailedStart();
    }
    if (!start) return null;
    const settled = await c.settle(row, 'creating', 'substrate_running', 'machine.started', { by });
    if (!settled) throw await c.raced(row.id);
    ready.watchReady(row);
    return settled;
  }

  /** Is the member running, and has it been given a fresh identity (machine-id, hostname)? */
  async function reidentified(row: MachineRow): Promise<boolean> {
    if ((await substrate.liveness(row.id).catch(() => 'lost')) !== 'running') return false;
    try {
      await locks.run(row.id, () => substrate.reidentify(row.id));
      return true;
    } catch (e) {
      d.onFailure?.(row.id, 'pool_reidentify', e);
      return false;
    }
  }

  /**
   * Act on an admitted machine that took a warm pool member (its row has the member's id and a fresh agent key):
   * the member runs, so it is given its own identity before anyone calls it and the outcome is recorded; the
   * first agent call enrolls this row's key. A member that died since the pool last looked, or that cannot be
   * given its identity, is destroyed and the machine booted cold under the same id.
   */
  async function adopt(row: MachineRow, by: Actor): Promise<MachineRow | null> {
    if (!(await reidentified(row))) {
      await locks.run(row.id, () => substrate.destroy(row.id)).catch((e) => d.onFailure?.(row.id, 'pool_take', e));
      return launch(row, { kind: 'base' }, true, by);
    }
    const settled = await c.settle(row, 'creating', 'substrate_running', 'machine.started', { by });
    if (!settled) throw await c.raced(row.id);
    ready.watchReady(row);
    return settled;
  }

  /** Decide and record a create: the template's disk and size, admission, the row (with a warm member's id). */
  function admitCreate(p: OrgPrincipal, req: CreateMachineRequest, warm: string | null): Promise<{ row: MachineRow; source: DiskSource }> {
    const orgId = p.org_id;
    const by = actorOf(p);
    return store.db.tx(async () => {
      let source: DiskSource = { kind: 'base' };
      let size: MachineSize = req.size ?? 'small';
      let template: string | null = null;
      if (req.template !== undefined) {
        const t = await d.templates.sourceInTx(orgId, req.template);
        source = t.source;
        template = t.template.id;
        // The template's disk holds a filesystem of its size: a machine may be larger, never smaller.
        if (req.size !== undefined && SIZE_RANK[req.size] < SIZE_RANK[t.template.size]) {
          throw ERRORS.templateNeedsLargerSize(t.template.id, t.template.size, [{ field: 'size', message: `smaller than the template's size (${t.template.size})` }]);
        }
        size = req.size ?? t.template.size;
      }
      const row = await admitInTx(c, orgId, by, { name: req.name, size, template, region: req.region ?? null, metadata: req.metadata, start: req.start, ...(warm ? { id: warm } : {}) }, {});
      return { row, source };
    });
  }

  return {
    /** Returns once the machine is running (or, with start:false, once it exists stopped). */
    async create(p: OrgPrincipal, req: CreateMachineRequest): Promise<Machine> {
      const orgId = p.org_id;
      const by = actorOf(p);
      // A template's layer held on another host is brought here before anything is recorded (its errors as fork's).
      if (req.template !== undefined) await d.templates.bring(orgId, req.template);
      // A plain create of the pool's image may take a warm member (domain/warm-pool.ts says which).
      const warmSize: MachineSize = req.size ?? 'small';
      const warm = poolEligible(req) ? pool.take(warmSize) : null;
      let admitted: { row: MachineRow; source: DiskSource };
      try {
        admitted = await admitCreate(p, req, warm);
      } catch (e) {
        if (warm) pool.giveBack(warm, warmSize);
        throw e;
      }
      const { row, source } = admitted;
      if (poolEligible(req)) pool.noteDemand(row.size);
      let settled: MachineRow | null;
      if (warm) {
        faultPoint('machines.create.warm_taken');
        pool.taken(warm);
        settled = await adopt(row, by);
      } else settled = await launch(row, source, req.start, by);
      // The answer is the row as the outcome stored it (its RETURNING, no read again); with start:false, as admitted.
      return settled ? machineView(settled) : c.current(orgId, row.id);
    },

    /**
     * A new machine whose disk is one of `id`'s snapshots, or `id`'s disk as it is now (captured first, and not
     * kept as a snapshot). Quotas as for create. The fork stands on the layer itself: deleting the parent or the
     * snapshot leaves it working.
     */
    async fork(p: OrgPrincipal, id: string, req: ForkMachineRequest): Promise<Machine> {
      const orgId = p.org_id;
      const by = actorOf(p);
      // A live fork placed here while its parent is on another host: refused before anything is recorded when this
      // process cannot ask that host or move its disk.
      if (req.snapshot_id === undefined && elsewhere((await c.load(orgId, id)).host_id) && !d.parentDisk) throw ERRORS.liveForkUnconfigured();
      // A snapshot whose layers another host holds is brought here first, before anything is recorded: a host that
      // is down refuses the fork (409) and one out of reach asks for a retry (503), with no machine row left behind.
      if (req.snapshot_id !== undefined) await d.snapshots.bringReady(orgId, req.snapshot_id, (await c.load(orgId, id)).id);
      const { row, parent, snap } = await store.db.tx(async () => {
        const parent = await c.load(orgId, id);
        let snap: { id: string; layer_id: string } | null = null;
        if (req.snapshot_id !== undefined) {
          snap = await d.snapshots.readyOfMachineInTx(orgId, parent.id, req.snapshot_id);
        } else if (parent.state !== 'running' && parent.state !== 'stopped') {
          throw ERRORS.cannotForkInState(parent.state);
        }
        const row = await admitInTx(c, orgId, by, {
          // The fork's region hint, checked against this host when it was given (placement chose this host for it);
          // without one the parent's is recorded, and placement ranked by it.
          name: req.name, size: parent.size, template: parent.template, region: req.region ?? parent.region, metadata: {}, start: true, regionFromParent: req.region === undefined,
        }, { forked_from: parent.id, snapshot_id: snap?.id ?? null });
        return { row, parent, snap };
      });
      // The new machine's id holds a pin on the layer until its disk stands on it (so a snapshot deleted
      // meanwhile cannot free it), then lets go; the reconciler releases it if this process dies in between.
      // A live fork of a parent on another host: its capture there is pinned for the fork until the disk is made
      // here, then let go (services/live-fork.ts; that host's pin sweep if the release does not arrive).
      const away = snap === null && elsewhere(parent.host_id) ? parent.host_id : null;
      try {
        await d.snapshots.holding(row.id, async () => {
          let layerId: string;
          try {
            if (snap) {
              layerId = snap.layer_id;
              await substrate.pinLayer(layerId, row.id);
            } else if (away) {
              layerId = await captureElsewhere(away, parent.id, row.id);
            } else {
              layerId = (await locks.run(parent.id, () => substrate.capture(parent.id, row.id))).layerId;
            }
          } catch (e) {
            await c.fail(row, 'creating', 'fork', e);
            throw ERRORS.machineNotForked();
          }
          try {
            await launch(row, { kind: 'layer', layerId }, true, by);
          } finally {
            await substrate.releaseLayer(layerId, row.id).catch((e) => d.onFailure?.(row.id, 'layer_release', e));
          }
        });
      } finally {
        if (away) await d.parentDisk?.release(away, parent.id, row.id).catch((e) => d.onFailure?.(row.id, 'fork_release', e));
      }
      return c.current(orgId, row.id);
    },
  };
}

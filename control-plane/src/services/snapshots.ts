/**
 * Snapshots: captures of a machine's disk into an immutable layer the substrate keeps pinned by the snapshot's
 * id. Same shape as the machine lifecycle:
 *   decide + record (one transaction: quota, the machine's state, a `pending` row, `snapshot.started`)
 *   → act (substrate.capture, under the machine's disk lock; live when it runs, and it keeps running)
 *   → record the outcome by compare-and-set on `pending` (`ready` + size + `snapshot.completed`, or `error` +
 *     `snapshot.failed`).
 * A snapshot outlives its machine; only the newest of a machine's snapshots can be deleted.
 */
import { AppError } from '../../../shared/errors.js';
import { newId } from '../../../shared/ids.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import type { CreateSnapshotRequest, Snapshot, SnapshotListQuery, SnapshotOrigin } from '../../../shared/schemas/snapshot.js';
import type { OrgPrincipal } from '../context.js';
import { decideSnapshot, snapshotInTheWay } from '../domain/snapshot-lifecycle.js';
import { faultPoint } from '../fault-points.js';
import { pageOf } from '../store/pagination.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { SnapshotRow } from '../store/repos/snapshots.js';
import type { Store } from '../store/store.js';
import type { HostHealth } from './host-health.js';
import type { Layers } from '../substrate/substrate.js';
import { actorOf, SYSTEM } from './actor.js';
import type { DiskLocks } from './disk-locks.js';
import type { Actor, EventService } from './events.js';
import type { QuotaService } from './quotas.js';
import { createLayerPuller, type HeldLayer, type LayerPullDeps, type PullOutcome } from './layer-pull.js';
import type { LogSink } from '../log.js';
import { forkOfHolder, forkPinKept } from './live-fork.js';
import { ERRORS } from '../errors.js';

export function snapshotView(r: SnapshotRow): Snapshot {
  // An allow-list: the layer id (a substrate name) never leaves the control plane.
  return {
    id: r.id, name: r.name, machine_id: r.machine_id, state: r.state, origin: r.origin, includes_memory: false,
    size_bytes: r.size_bytes, created_at: r.created_at, completed_at: r.completed_at,
  };
}

export interface SnapshotServiceDeps {
  store: Store;
  /** Only disks and layers: captures, pins, the reconciler's pin sweep. */
  substrate: Layers;
  events: EventService;
  quotas: QuotaService;
  locks: DiskLocks;
  now: () => Date;
  onFailure?: (id: string, op: string, cause: unknown) => void;
  /** Refuses new captures while the host is below its disk reserve. */
  hostHealth?: HostHealth;
  /** This process's host: recorded as the host holding each capture's layers (null: no registry). */
  hostId?: string | null;
  /** How layers held on another host are brought here (services/layer-pull.ts); absent: nothing moves. */
  layerPull?: LayerPullDeps['transfer'];
  /** The operator's log (layer pull progress). */
  log?: LogSink;
}

/** What must allow a capture (beginInTx). */
export type CaptureAdmission = 'quota' | 'subscription' | 'system';

/** Machine states whose disk can be captured: a running one live, a stopped one at rest. */
const CAPTURABLE = new Set(['running', 'stopped']);

export function createSnapshotService(d: SnapshotServiceDeps) {
  const { store, substrate, events } = d;
  const at = () => d.now().toISOString();
  /** Pin holders this process is acting for right now; the reconciler never releases them. */
  const inFlight = new Set<string>();
  const puller = createLayerPuller({
    hostId: d.hostId ?? null, transfer: d.layerPull ?? null, layers: substrate, host: (id) => store.hosts.get(id), ...(d.log ? { log: d.log } : {}),
  });

  async function load(orgId: string, id: string): Promise<SnapshotRow> {
    const s = await store.snapshots.inOrg(orgId, id);
    if (!s) throw ERRORS.noSuchSnapshot();
    return s;
  }

  function capturable(m: MachineRow): void {
    if (!CAPTURABLE.has(m.state)) throw ERRORS.cannotCaptureInState(m.state);
  }

  /**
   * Decide and record a capture, inside the caller's transaction. `admit` says what must allow it:
   *   quota: the machine's snapshots_per_machine count (and so the subscription): captures a caller asks for;
   *   subscription: only the subscription, never the count: the restore's "Before restore", so that a machine at
   *     its limit can still be restored (the spec's only condition on a restore is the lease); it counts afterwards;
   *   system: nothing: captures the system takes on its own (a billing stop) must not lose the disk to a limit.
   */
  async function beginInTx(m: MachineRow, origin: SnapshotOrigin, name: string | undefined, by: Actor, opts: { admit: CaptureAdmission }): Promise<SnapshotRow> {
    capturable(m);
    if (opts.admit === 'quota') await d.quotas.check(m.org_id, 'snapshots_per_machine', { current: () => store.snapshots.countForMachine(m.id) });
    else if (opts.admit === 'subscription') await d.quotas.checkSubscription(m.org_id);
    const state = decideSnapshot(null, 'capture');
    if (!state) throw ERRORS.snapshotTableRefusesCapture();
    const t = at();
    const row: SnapshotRow = {
      id: newId('snapshot'), org_id: m.org_id, machine_id: m.id, name: name ?? `${m.name} ${t}`, state, origin,
      layer_id: null, size_bytes: null, created_at: t, completed_at: null, host_id: d.hostId ?? null,
    };
    await store.snapshots.insert(row);
    await events.append(m.org_id, m.id, 'snapshot.started', { snapshot_id: row.id, origin, by });
    inFlight.add(row.id);
    return row;
  }

  /**
   * Act and record the outcome. The caller holds the machine's disk lock (or is inside one). Never throws:
   * the settled row says how it went.
   */
  async function captureNow(row: SnapshotRow): Promise<SnapshotRow> {
    try {
      let result;
      try {
        faultPoint('snapshots.capture.before_substrate');
        result = await substrate.capture(row.machine_id, row.id);
      } catch (e) {
        d.onFailure?.(row.machine_id, 'capture', e);
        // Only the error code reaches the event: causes can name host paths.
        const code = e instanceof AppError ? e.code : 'internal_error';
        await store.db.tx(async () => {
          if (await store.snapshots.settleError(row.id, at())) await events.append(row.org_id, row.machine_id, 'snapshot.failed', { snapshot_id: row.id, code });
        });
        return (await store.snapshots.byId(row.id)) ?? row;
      }
      faultPoint('snapshots.capture.after_substrate');
      const settled = await store.db.tx(async () => {
        if (!(await store.snapshots.settleReady(row.id, result.layerId, result.bytes, at()))) return false;
        await events.append(row.org_id, row.machine_id, 'snapshot.completed', { snapshot_id: row.id, size_bytes: result.bytes, live: result.live });
        return true;
      });
      // Settled by someone else (the reconciler of another run cannot, so only a store that went away): the
      // layer must not stay pinned for a row that does not say it holds it.
      if (!settled) await substrate.releaseLayer(result.layerId, row.id).catch(() => {});
      return (await store.snapshots.byId(row.id)) ?? row;
    } finally {
      inFlight.delete(row.id);
    }
  }

  /** Start the act under the machine's disk lock; call synchronously after the deciding transaction. */
  function capture(row: SnapshotRow): Promise<SnapshotRow> {
    return d.locks.run(row.machine_id, () => captureNow(row));
  }

  /** Keep `holder`'s pin on `layerId` out of the reconciler's reach while `fn` runs. */
  async function holding<T>(holder: string, fn: () => Promise<T>): Promise<T> {
    inFlight.add(holder);
    try {
      return await fn();
    } finally {
      inFlight.delete(holder);
    }
  }

  /** A ready snapshot of the organization, for fork and restore and templates. */
  async function readyInTx(orgId: string, id: string, field = 'snapshot_id'): Promise<SnapshotRow & { layer_id: string }> {
    const s = await store.snapshots.inOrg(orgId, id);
    if (!s) throw ERRORS.noSuchSnapshot([{ field, message: 'no such snapshot' }]);
    if (s.state !== 'ready' || s.layer_id === null) throw ERRORS.snapshotNotReady(s.id, s.state);
    return { ...s, layer_id: s.layer_id };
  }

  /** A ready snapshot of machine `machineId` (fork and restore take only the machine's own). */
  async function readyOfMachineInTx(orgId: string, machineId: string, id: string): Promise<SnapshotRow & { layer_id: string }> {
    const s = await readyInTx(orgId, id);
    if (s.machine_id !== machineId) {
      throw ERRORS.snapshotOfAnotherMachine(s.id, machineId, [{ field: 'snapshot_id', message: 'a snapshot of another machine' }]);
    }
    return s;
  }

  /**
   * Before a disk is made here on a snapshot's or template's layer: a layer held on another host is brought here
   * and pinned by `holder` (the snapshot's or template's id: cached for the next use on this host). Outside any
   * transaction (it may move gigabytes); the reconciler keeps its hands off `holder` meanwhile.
   */
  function bring(held: HeldLayer, holder: string): Promise<PullOutcome> {
    return holding(holder, () => puller.bring(held, holder));
  }

  /**
   * The first step of a fork, restore or template made from snapshot `id` (of machine `machineId`, when given):
   * the ready snapshot, brought here if another host holds it (pinned by the snapshot's id). A down host is 409
   * `layerOnLostHost`, one out of reach 503; nothing is recorded before it.
   */
  async function bringReady(orgId: string, id: string, machineId: string | null): Promise<PullOutcome> {
    const s = await store.db.tx(() => (machineId === null ? readyInTx(orgId, id) : readyOfMachineInTx(orgId, machineId, id)));
    return bring({ layerId: s.layer_id, hostId: s.host_id }, s.id);
  }

  return {
    view: snapshotView,
    bring,
    bringReady,
    beginInTx,
    capture,
    captureNow,
    holding,
    readyInTx,
    readyOfMachineInTx,

    get: async (orgId: string, id: string): Promise<Snapshot> => snapshotView(await load(orgId, id)),

    list(orgId: string, q: SnapshotListQuery): Promise<Page<Snapshot>> {
      const f = { machine_id: q.machine_id ?? null, origin: q.origin ?? null };
      return pageOf(q, (after, limit) => store.snapshots.page(orgId, after, limit, f), snapshotView);
    },

    /** POST /v1/snapshots: the pending record, or with `wait` the settled one. */
    async create(p: OrgPrincipal, req: CreateSnapshotRequest, wait: boolean): Promise<{ snapshot: Snapshot; settled: boolean }> {
      d.hostHealth?.checkReserve();
      const row = await store.db.tx(async () => {
        const m = await store.machines.inOrg(p.org_id, req.machine_id);
        if (!m) throw ERRORS.noSuchMachine([{ field: 'machine_id', message: 'no such machine' }]);
        return beginInTx(m, 'manual', req.name, actorOf(p), { admit: 'quota' });
      });
      const done = capture(row);
      if (!wait) {
        done.catch(() => {});
        return { snapshot: snapshotView(row), settled: false };
      }
      const s = await done;
      if (s.state === 'error') {
        throw ERRORS.captureFailed(s.id);
      }
      return { snapshot: snapshotView(s), settled: true };
    },

    async remove(p: OrgPrincipal, id: string): Promise<void> {
      const by = actorOf(p);
      const row = await store.db.tx(async () => {
        const s = await load(p.org_id, id);
        const way = snapshotInTheWay(await store.snapshots.chain(s.machine_id), s.id);
        if (way) {
          throw ERRORS.newerSnapshotExists(way.id, way.name, [{ field: 'snapshot_id', message: `${way.id} is in the way` }]);
        }
        const to = decideSnapshot(s.state, 'delete');
        if (!to) throw ERRORS.snapshotBusy(s.id, s.state);
        if (!(await store.snapshots.casState(s.id, s.state, to))) throw ERRORS.snapshotChanged();
        return s;
      });
      await release(row, by);
    },

    /**
     * Settle what a previous run left: a capture that was pending becomes `ready` if the substrate holds a layer
     * pinned by it (the capture finished, its record did not), else `error`; deletions are finished; then every
     * pin whose holder is no longer a ready snapshot or template is released, so a crash leaks no layer.
     */
    async reconcile(before: string): Promise<{ settled: number; released: number }> {
      let pins;
      try {
        pins = await substrate.layerPins();
      } catch (e) {
        d.onFailure?.('*', 'layer_pins', e);
        return { settled: 0, released: 0 };
      }
      let settled = 0;
      for (const s of (await store.snapshots.inStates(['pending'])).filter((x) => x.created_at < before && !inFlight.has(x.id))) {
        const pin = pins.find((x) => x.holder === s.id);
        await store.db.tx(async () => {
          if (pin && (await store.snapshots.settleReady(s.id, pin.layerId, pin.bytes, at()))) {
            await events.append(s.org_id, s.machine_id, 'snapshot.completed', { snapshot_id: s.id, size_bytes: pin.bytes, reconciled: true });
            settled++;
          } else if (!pin && (await store.snapshots.settleError(s.id, at()))) {
            await events.append(s.org_id, s.machine_id, 'snapshot.failed', { snapshot_id: s.id, code: 'internal_error', reconciled: true });
            settled++;
          }
        });
      }
      for (const s of await store.snapshots.inStates(['deleting'])) await release(s, SYSTEM).catch((e) => d.onFailure?.(s.machine_id, 'snapshot_delete', e));
      for (const t of (await store.templates.inStates(['building'])).filter((x) => x.created_at < before && !inFlight.has(x.id))) {
        await store.templates.settleError(t.id, at());
      }
      return { settled, released: await sweepPins() };
    },

    sweepPins,
  };

  /**
   * Every pin on this host whose holder is no longer a ready snapshot or template is released (a deleted snapshot's
   * or template's copy on a host other than the one that deleted it, a crash's leftovers, a live fork's capture for
   * a fork no longer being made on another host); returns how many. Run at
   * start by the reconciler and every few minutes by the host driver's job (cluster/substrate-job.ts).
   */
  async function sweepPins(): Promise<number> {
    let released = 0;
    for (const pin of await substrate.layerPins()) {
      if (inFlight.has(pin.holder)) continue;
      // A live fork's capture for a fork made on another host: kept while that fork is being made (live-fork.ts).
      const fork = forkOfHolder(pin.holder);
      if (fork !== null && forkPinKept((await store.machines.byId(fork))?.state)) continue;
      if ((await store.snapshots.byId(pin.holder))?.state === 'ready' || (await store.templates.byId(pin.holder))?.state === 'ready') continue;
      // Only holders this control plane gives out (snapshots, templates, machines mid-fork or mid-restore, live forks'
      // captures for another host).
      if (fork === null && !/^(snp|tpl|mch)_[0-9a-z]+$/.test(pin.holder)) continue;
      await substrate.releaseLayer(pin.layerId, pin.holder).catch((e) => d.onFailure?.('*', 'layer_release', e));
      released++;
    }
    return released;
  }

  /** Release a `deleting` snapshot's layer, then remove its row (retried by delete or the reconciler). */
  async function release(s: SnapshotRow, by: Actor): Promise<void> {
    if (s.layer_id) {
      try {
        await substrate.releaseLayer(s.layer_id, s.id);
      } catch (e) {
        d.onFailure?.(s.machine_id, 'snapshot_delete', e);
        throw ERRORS.snapshotNotDeletedYet(s.id);
      }
    }
    await store.db.tx(async () => {
      if (await store.snapshots.remove(s.id)) await events.append(s.org_id, s.machine_id, 'snapshot.deleted', { snapshot_id: s.id, by });
    });
  }
}
export type SnapshotService = ReturnType<typeof createSnapshotService>;

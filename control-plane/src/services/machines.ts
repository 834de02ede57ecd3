/**
 * Machine lifecycle. Every operation has the same shape:
 *   decide + record (one transaction: domain/machine-lifecycle.ts decides, the row moves by
 *   compare-and-set on the state that was read, the event is appended)
 *   → act on the substrate (async, outside any transaction)
 *   → record the outcome, again compare-and-set on the state this call put there.
 * Of two concurrent lifecycle calls exactly one moves the row; the other gets 409 naming both states.
 * A substrate failure lands the machine in `error` with a `machine.failed` event.
 */
import { randomBytes } from 'node:crypto';
import { AppError } from '../../../shared/errors.js';
import { newId, randomBase36 } from '../../../shared/ids.js';
import type { CreateMachineRequest, Machine, MachineListQuery, MachineSize, MachineState, UpdateMachineRequest } from '../../../shared/schemas/machine.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import { readAgentAnswer } from '../agent-client/answer.js';
import { AgentPool, type AgentRequest, type AgentResponse } from '../agent-client/pool.js';
import type { Principal } from '../context.js';
import { committedBy, decideCapacity, type CommitRatios, type Resources } from '../domain/capacity.js';
import { CATALOG, catalogAt, type CatalogVersion } from '../domain/catalog.js';
import { conflictMessage, decide, isTransient, type LifecycleTrigger } from '../domain/machine-lifecycle.js';
import { pageOf } from '../store/pagination.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { resourcesForSize, type Substrate } from '../substrate/substrate.js';
import { faultPoint } from '../fault-points.js';
import { actorOf, SYSTEM } from './actor.js';
import type { BillingService } from './billing.js';
import type { Actor, EventService } from './events.js';
import type { LeaseService } from './leases.js';
import type { QuotaService } from './quotas.js';
import type { SessionService } from './sessions.js';
import type { DiskLocks } from './disk-locks.js';
import type { HostHealth } from './host-health.js';
import type { SnapshotService } from './snapshots.js';
import type { TemplateService } from './templates.js';
import type { ForkMachineRequest, RestoreMachineRequest } from '../../../shared/schemas/snapshot.js';
import type { DiskSource } from '../substrate/substrate.js';

const SIZE_RANK: Record<MachineSize, number> = { small: 0, standard: 1, large: 2 };

export function machineView(m: MachineRow): Machine {
  // An allow-list of fields: the agent token (and anything substrate-side) can never leak by accident.
  return {
    id: m.id, name: m.name, size: m.size, template: m.template, region: m.region,
    metadata: JSON.parse(m.metadata) as Record<string, string>, state: m.state,
    created_at: m.created_at, updated_at: m.updated_at, state_changed_at: m.state_changed_at,
  };
}

export interface MachineServiceDeps {
  store: Store;
  substrate: Substrate;
  pool: AgentPool;
  events: EventService;
  leases: LeaseService;
  sessions: SessionService;
  quotas: QuotaService;
  billing: BillingService;
  snapshots: SnapshotService;
  templates: TemplateService;
  /** Orders the acts on each machine's disk (shared with the snapshot service). */
  locks: DiskLocks;
  now: () => Date;
  catalog?: readonly CatalogVersion[];
  /** Log a substrate failure's cause for the operator (never a path or token in the API answer). */
  onFailure?: (machineId: string, op: string, cause: unknown) => void;
  /** How `machine.ready` is detected after a boot: the agent's /display polled until `up` (false: never). */
  readyProbe?: { intervalMs: number; timeoutMs: number } | false;
  /** Admission control: the host's totals and the commit ratios (domain/capacity.ts). Absent: no limit. */
  capacity?: { host: Resources; ratios: CommitRatios };
  /** Refuses new work while the host is below its disk reserve; checked by the substrate watch. */
  hostHealth?: HostHealth;
  /** Guest networking of new machines (the operator's MACHINE_NETWORK; default none). */
  network?: 'outbound' | 'none';
}

/** Room frees when someone stops or deletes a machine: no better guess than half a minute. */
const CAPACITY_RETRY_AFTER_S = 30;

/** A machine whose disk the host never finished making (a crash interrupted its create). */
const NO_DISK = 'The machine has no disk on this host: its create did not complete. Delete it and create it again.';

/** How often the substrate watch checks the running machines (a machine killed from outside is seen within this). */
const WATCH_INTERVAL_MS = 2_000;

const DEFAULT_READY_PROBE = { intervalMs: 1_000, timeoutMs: 180_000 };

/** `machine.failed {operation: run}`'s reason for each way the watch finds a running machine dead. */
const FAILED_REASON = { crashed: 'exited', frozen: 'frozen', lost: 'lost', absent: 'lost' } as const;

export function createMachineService(d: MachineServiceDeps) {
  const { store, substrate, events, locks } = d;
  const catalog = d.catalog ?? CATALOG;
  const at = () => d.now().toISOString();
  const bootListeners: Array<(m: MachineRow) => void> = [];

  function load(orgId: string, id: string): MachineRow {
    const m = store.machines.inOrg(orgId, id);
    if (!m) throw new AppError('not_found', 'No such machine.');
    return m;
  }

  /**
   * Decide and record one transition. Inside a transaction; throws 409 naming both states when the
   * stored state does not allow it or moved under us.
   */
  function transition(m: MachineRow, trigger: LifecycleTrigger): MachineState {
    const dec = decide(m.state, trigger);
    if (!dec.ok) throw new AppError('conflict', conflictMessage(m.state, trigger));
    if (!store.machines.casState(m.id, m.state, dec.to, at())) {
      const now = store.machines.byId(m.id);
      throw new AppError('conflict', now ? conflictMessage(now.state, trigger) : 'The machine was deleted.');
    }
    return dec.to;
  }

  /** Record an outcome with compare-and-set on the state this call put there; false if someone else moved it. */
  function settle(m: MachineRow, from: MachineState, trigger: LifecycleTrigger, event: 'machine.started' | 'machine.stopped' | null, data: Record<string, unknown> = {}): boolean {
    return store.db.tx(() => {
      const dec = decide(from, trigger);
      if (!dec.ok) return false;
      if (!store.machines.casState(m.id, from, dec.to, at())) return false;
      if (event) events.append(m.org_id, m.id, event, { from, to: dec.to, ...data });
      return true;
    });
  }

  /** The table's target for a move the caller knows is legal (a table edit that breaks it fails loudly). */
  function decideTo(from: MachineState, trigger: LifecycleTrigger): MachineState {
    const dec = decide(from, trigger);
    if (!dec.ok) throw new AppError('internal_error', `The transition table does not allow ${trigger} from ${from}.`);
    return dec.to;
  }

  function fail(m: MachineRow, from: MachineState, op: string, cause: unknown): void {
    d.onFailure?.(m.id, op, cause);
    store.db.tx(() => {
      if (!decide(from, 'fail').ok) return;
      if (!store.machines.casState(m.id, from, 'error', at())) return;
      // Only the operation and the error code reach the event: causes can name host paths.
      const code = cause instanceof AppError ? cause.code : 'internal_error';
      events.append(m.org_id, m.id, 'machine.failed', { from, to: 'error', operation: op, code });
    });
    d.pool.drop(m.id);
  }

  /**
   * Inside the transaction that records a boot (create, fork, create from a template, start, the start
   * half of restart): the organization's running_machines quota (402), then the host's capacity (503).
   * Security gate / invariant: the committed resources are counted in this same transaction, from the
   * rows in compute-holding states, so of two concurrent boots only one can take the last room (the
   * first one's row is already `creating`/`starting` when the second counts).
   */
  function reserveCompute(orgId: string, size: MachineSize): void {
    d.quotas.check(orgId, 'running_machines');
    if (!d.capacity) return;
    const sizes = catalogAt(d.now(), catalog).sizes;
    const dec = decideCapacity(d.capacity.host, d.capacity.ratios, committedBy(store.machines.computeBySize(), sizes), resourcesForSize(size, sizes));
    if (!dec.ok) {
      // No figures in the message: they would tell one tenant how much the others run.
      throw new AppError('compute_unavailable', `This host has no room for another ${size} machine right now; retry later, or stop a running machine.`, {
        headers: { 'retry-after': String(CAPACITY_RETRY_AFTER_S) },
      });
    }
  }

  function checkSize(orgId: string, size: MachineSize): void {
    const e = d.billing.entitlements(d.billing.account(orgId));
    // Without entitlements the quota engine refuses first (subscription / no agreement).
    if (!e) return;
    const largest = e.largest_size;
    if (largest === null || SIZE_RANK[size] > SIZE_RANK[largest]) {
      throw new AppError('invalid_request', `The plan's largest machine size is ${largest ?? 'negotiated and not set'}.`, {
        details: [{ field: 'size', message: `larger than the plan allows (${largest ?? 'none'})` }],
      });
    }
  }

  function generateName(orgId: string): string {
    for (;;) {
      const n = `machine-${randomBase36(6)}`;
      if (!store.machines.nameTaken(orgId, n)) return n;
    }
  }

  interface Admission {
    name: string | undefined;
    size: MachineSize;
    template: string | null;
    region: string | null;
    metadata: Record<string, string>;
    start: boolean;
  }

  /** Decide and record a new machine (create, fork): quotas, plan size, name, the row and machine.created. */
  function admitInTx(orgId: string, by: ReturnType<typeof actorOf>, a: Admission, eventData: Record<string, unknown>): MachineRow {
    d.quotas.check(orgId, 'machines');
    d.hostHealth?.checkReserve();
    if (a.start) reserveCompute(orgId, a.size);
    checkSize(orgId, a.size);
    if (a.name !== undefined && store.machines.nameTaken(orgId, a.name)) {
      throw new AppError('conflict', `A machine named ${a.name} already exists.`, { details: [{ field: 'name', message: 'already in use' }] });
    }
    const dec = decide(null, a.start ? 'create' : 'create_stopped');
    if (!dec.ok) throw new AppError('internal_error', 'The transition table does not allow creating a machine.');
    const t = at();
    const m: MachineRow = {
      id: newId('machine'), org_id: orgId, name: a.name ?? generateName(orgId), size: a.size,
      template: a.template, region: a.region, metadata: JSON.stringify(a.metadata), state: dec.to,
      agent_token: randomBytes(32).toString('base64url'), created_by_kind: by.type, created_by_id: by.id,
      created_at: t, updated_at: t, state_changed_at: t, deleted_at: null,
    };
    store.machines.insert(m);
    events.append(orgId, m.id, 'machine.created', { to: dec.to, size: m.size, by, ...(a.template ? { template: a.template } : {}), ...eventData });
    return m;
  }

  /** Act on an admitted machine: create it on the substrate (on `source`) and record that it runs. */
  async function launch(row: MachineRow, source: DiskSource, start: boolean, by: Actor): Promise<void> {
    const resources = resourcesForSize(row.size, catalogAt(d.now(), catalog).sizes);
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
        store.db.tx(() => store.machines.removeRow(row.id));
        throw new AppError('compute_unavailable', 'The machine could not be created.', { headers: { 'retry-after': '5' } });
      }
      fail(row, 'creating', 'create', e);
      throw new AppError('compute_unavailable', 'The machine failed to start.', { headers: { 'retry-after': '5' } });
    }
    if (start) {
      if (!settle(row, 'creating', 'substrate_running', 'machine.started', { by })) throw raced(row.id);
      watchReady(row);
    }
  }

  /** Inside the machine's disk lock: a machine stopped for a restore is started again (stopping → running). */
  async function bootAfterRestore(m: MachineRow, by: Actor): Promise<void> {
    const go = store.db.tx(() => {
      if (!settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by })) return false;
      transition(store.machines.byId(m.id)!, 'start');
      return true;
    });
    if (!go) throw raced(m.id);
    try {
      await substrate.start(m.id);
    } catch (e) {
      fail(m, 'starting', 'restore', e);
      throw new AppError('compute_unavailable', 'The machine failed to start after the restore.', { headers: { 'retry-after': '5' } });
    }
    if (!settle(m, 'starting', 'boot_complete', 'machine.started', { by })) throw raced(m.id);
    watchReady(m);
  }

  async function runStart(m: MachineRow, by: Actor): Promise<void> {
    try {
      await locks.run(m.id, () => substrate.start(m.id));
    } catch (e) {
      if (e instanceof AppError && e.code === 'not_found') {
        // The host has no disk for it (its create never completed): permanent, so no Retry-After.
        const gone = new AppError('conflict', NO_DISK);
        fail(m, 'starting', 'start', gone);
        throw gone;
      }
      fail(m, 'starting', 'start', e);
      throw new AppError('compute_unavailable', 'The machine failed to start.', { headers: { 'retry-after': '5' } });
    }
    if (!settle(m, 'starting', 'boot_complete', 'machine.started', { by })) throw raced(m.id);
    watchReady(m);
  }

  async function runStop(m: MachineRow, trigger: 'stop' | 'restart', by: Actor): Promise<void> {
    d.pool.drop(m.id);
    try {
      await locks.run(m.id, () => substrate.stop(m.id));
    } catch (e) {
      fail(m, 'stopping', trigger, e);
      throw new AppError('compute_unavailable', 'The machine failed to stop.', { headers: { 'retry-after': '5' } });
    }
    d.pool.drop(m.id);
    if (!settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by })) throw raced(m.id);
  }

  /**
   * One pass of the substrate watch over the running machines. A machine whose guest is gone (killed from
   * outside, crashed, its runtime died) moves to `error` with `machine.failed`; one whose guest shut itself
   * down cleanly moves to `stopped`. Either way the host side is cleaned (mount, port guard) so a start works.
   * The move is a compare-and-set on the row as it was read (state and state_changed_at), inside the disk
   * lock: a user's stop, restart or delete decided meanwhile wins and this pass reports nothing.
   */
  async function watchPass(): Promise<Array<{ id: string; to: 'error' | 'stopped' }>> {
    const out: Array<{ id: string; to: 'error' | 'stopped' }> = [];
    try {
      d.hostHealth?.check();
    } catch (e) {
      d.onFailure?.('*', 'host_health', e);
    }
    // The machines just stopped and started again by a volume recovery need no liveness check this pass.
    if (await watchDiskVolume()) return out;
    // Machines are handled side by side: one dead machine's cleanup (seconds when podman lost its monitor)
    // does not delay noticing the next.
    const running = store.machines.inStates(['running']);
    let answered = 0;
    await Promise.all(running.map(async (m) => {
      let seen;
      try {
        seen = await substrate.liveness(m.id);
        answered++;
      } catch (e) {
        d.onFailure?.(m.id, 'watch', e);
        return;
      }
      if (seen === 'running') return;
      const unchanged = () => {
        const now = store.machines.byId(m.id);
        return !!now && now.state === 'running' && now.state_changed_at === m.state_changed_at;
      };
      const to = await locks.run(m.id, async (): Promise<'error' | 'stopped' | null> => {
        if (!unchanged()) return null;
        // Asked again inside the lock: an act queued before this one may have changed the answer.
        const how = await substrate.liveness(m.id).catch(() => seen);
        if (how === 'running') return null;
        if (how === 'frozen') {
          // Every capture of this process holds the disk lock this runs in: a frozen machine here is a fault (a
          // control plane killed mid-capture, a freeze from outside). Thawed, it runs on; one that cannot be
          // thawed answers nothing, so it fails like a dead one (a start after the cleanup begins clean).
          try {
            await substrate.thaw(m.id);
            d.onFailure?.(m.id, 'watch_thaw', new AppError('compute_unavailable', 'the machine was frozen with no capture in flight; thawed'));
            return null;
          } catch (e) {
            d.onFailure?.(m.id, 'watch_thaw', e);
          }
        }
        d.pool.drop(m.id);
        const moved = store.db.tx((): 'error' | 'stopped' | null => {
          if (!unchanged()) return null;
          if (how === 'shutdown') {
            if (!store.machines.casState(m.id, 'running', decideTo('running', 'exited'), at())) return null;
            d.leases.releaseInTx(m.org_id, m.id, 'machine_stopped', SYSTEM);
            events.append(m.org_id, m.id, 'machine.stopped', { from: 'running', to: 'stopped', by: SYSTEM, reason: 'guest_shutdown' });
            return 'stopped';
          }
          if (!store.machines.casState(m.id, 'running', decideTo('running', 'fail'), at())) return null;
          d.leases.releaseInTx(m.org_id, m.id, 'machine_failed', SYSTEM);
          events.append(m.org_id, m.id, 'machine.failed', {
            from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: FAILED_REASON[how],
          });
          return 'error';
        });
        // Still inside the disk lock, so a start decided after the move runs after this: unmount and unguard
        // what the dead guest left (replacing a container podman lost track of), so that start begins clean.
        if (moved && how !== 'lost' && how !== 'absent') {
          await substrate.stop(m.id, { timeoutMs: 1_000 }).catch((e) => d.onFailure?.(m.id, 'watch_cleanup', e));
        }
        return moved;
      });
      if (to) {
        d.onFailure?.(m.id, 'run', new AppError('compute_unavailable', `the machine's guest ${to === 'stopped' ? 'shut down' : 'was killed or crashed'} (${seen})`));
        out.push({ id: m.id, to });
      }
    }));
    if (running.length) d.hostHealth?.substrateAnswered(answered > 0);
    return out;
  }

  // Machines a disk-volume recovery stopped and owes a start live in the store (volume_restarts): recorded with
  // the decision to stop them, so a control plane killed before the volume is back still starts them.
  let recovering = false;

  /**
   * The machines' disk volume, in each watch pass: while it is read-only new work is refused (host health,
   * which also tells every organization once). Once the filesystem under a loop volume has its reserve back,
   * the volume is recovered. Returns whether a recovery ran.
   */
  async function watchDiskVolume(): Promise<boolean> {
    if (recovering) return false;
    const vol = substrate.diskVolume();
    d.hostHealth?.volumeReadOnly(vol?.readOnly === true);
    if (!vol || (!vol.readOnly && !store.volumeRestarts.any())) return false;
    if (vol.readOnly && (vol.backingDir === null || !(d.hostHealth?.hasRoom(vol.backingDir) ?? true))) return false;
    // Acts in flight (a create, start, stop or delete decided before the volume failed) finish first.
    if (store.machines.inStates(['creating', 'starting', 'stopping', 'deleting']).length) return false;
    recovering = true;
    try {
      if (vol.readOnly) await recoverDiskVolume();
      else await restartRecovered();
    } finally {
      recovering = false;
    }
    return true;
  }

  /**
   * Bring a read-only volume back (the kernel forced it read-only when its backing filesystem filled; btrfs
   * cannot be made writable again without a new mount). Decide and record: every running machine is `stopping`
   * (its guest cannot write anyway) and remembered; act: each is stopped (`machine.stopped {reason:
   * disk_read_only}`), the substrate mounts the volume again, and the remembered machines are started again.
   */
  async function recoverDiskVolume(): Promise<void> {
    const victims = store.db.tx(() =>
      store.machines.inStates(['running']).map((m) => {
        transition(m, 'stop');
        d.leases.releaseInTx(m.org_id, m.id, 'machine_stopped', SYSTEM);
        store.volumeRestarts.add(m.id);
        return m;
      }),
    );
    await Promise.all(victims.map(async (m) => {
      d.pool.drop(m.id);
      try {
        await locks.run(m.id, () => substrate.stop(m.id, { timeoutMs: 5_000 }));
      } catch (e) {
        fail(m, 'stopping', 'stop', e);
        return;
      }
      d.pool.drop(m.id);
      if (settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by: SYSTEM, reason: 'disk_read_only' })) {
        store.volumeRestarts.stopped(m.id, store.machines.byId(m.id)!.state_changed_at);
      }
    }));
    try {
      await substrate.remountDiskVolume();
    } catch (e) {
      // Still read-only: the next pass tries again; the stopped machines wait (they are stopped, honestly).
      d.onFailure?.('*', 'volume_remount', e);
      return;
    }
    d.hostHealth?.volumeReadOnly(false);
    await restartRecovered();
  }

  /** Start again the machines a recovery stopped: `machine.started {reason: host_recovered}`. */
  async function restartRecovered(): Promise<void> {
    const owed = store.volumeRestarts.all();
    await Promise.all(owed.map(async (r) => {
      // Only a machine still as the recovery left it: a user who started, stopped or deleted it meanwhile wins
      // (`stopped_at` NULL: killed before the stop was recorded; the reconciler settled it stopped since).
      // Its compute was held until the recovery stopped it, so no quota or capacity is asked again.
      const m = store.db.tx(() => {
        store.volumeRestarts.forget(r.machine_id);
        const now = store.machines.byId(r.machine_id);
        if (!now || now.deleted_at || now.state !== 'stopped' || (r.stopped_at !== null && now.state_changed_at !== r.stopped_at)) return null;
        transition(now, 'start');
        return now;
      });
      if (m) await systemStart(m, 'host_recovered');
    }));
  }

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
      settle(m, 'starting', 'abandon', 'machine.stopped', { by: SYSTEM, reason, restarted: false, code });
      return;
    }
    if (settle(m, 'starting', 'boot_complete', 'machine.started', { by: SYSTEM, reason })) watchReady(m);
  }

  /**
   * A machine the user left running that the host lost (a host reboot, or killed while the control plane was
   * down) is started again (`running → starting`, then systemStart with reason `host_restart`).
   * Returns whether it moved the row.
   */
  async function recoverLost(m: MachineRow): Promise<boolean> {
    const moved = store.db.tx(() => {
      const now = store.machines.byId(m.id);
      if (!now || now.state !== 'running' || now.state_changed_at !== m.state_changed_at) return false;
      transition(now, 'recover');
      return true;
    });
    if (!moved) return false;
    d.pool.drop(m.id);
    await systemStart(m, 'host_restart');
    return true;
  }

  function raced(id: string): AppError {
    const now = store.machines.byId(id);
    return new AppError('conflict', `The machine changed state during the operation; it is now ${now?.state ?? 'deleted'}.`);
  }

  /**
   * After a boot, wait (in the background) for the desktop to answer and record `machine.ready` once.
   * Stops as soon as the machine leaves the state this boot put it in.
   */
  function watchReady(m: MachineRow): void {
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
    const bootedAt = store.machines.byId(m.id)?.state_changed_at;
    const deadline = Date.now() + probe.timeoutMs;
    const tick = async () => {
      const now = store.machines.byId(m.id);
      if (!now || now.state !== 'running' || now.state_changed_at !== bootedAt || Date.now() > deadline) return;
      let up = false;
      try {
        const r = await d.pool.request(m.id, now.agent_token, { method: 'GET', path: '/display', timeoutMs: Math.max(probe.intervalMs, 2_000) });
        up = readAgentAnswer('display.get', r).up;
      } catch (e) {
        if (e instanceof AppError && /shutting down/.test(e.message)) return;
      }
      if (up) {
        store.db.tx(() => {
          const again = store.machines.byId(m.id);
          if (again && again.state === 'running' && again.state_changed_at === bootedAt) events.append(m.org_id, m.id, 'machine.ready', {});
        });
        return;
      }
      setTimeout(() => void tick().catch(() => {}), probe.intervalMs).unref?.();
    };
    // The watcher must never take the process down (e.g. the store closed during shutdown).
    const safeTick = () => tick().catch(() => {});
    setTimeout(safeTick, 0).unref?.();
  }

  function current(orgId: string, id: string): Machine {
    return machineView(load(orgId, id));
  }

  return {
    /** Run `fn` after every boot of any machine (outside any transaction; must not throw). */
    onBoot(fn: (m: MachineRow) => void): void {
      bootListeners.push(fn);
    },

    get: (orgId: string, id: string): Machine => current(orgId, id),

    list(orgId: string, q: MachineListQuery): Page<Machine> {
      return pageOf(q, (after, limit) => store.machines.page(orgId, after, limit, q.state ?? null), machineView);
    },

    /** Returns once the machine is running (or, with start:false, once it exists stopped). */
    async create(p: Principal, req: CreateMachineRequest): Promise<Machine> {
      const orgId = p.org_id!;
      const by = actorOf(p);
      const { row, source } = store.db.tx(() => {
        let source: DiskSource = { kind: 'base' };
        let size: MachineSize = req.size ?? 'small';
        let template: string | null = null;
        if (req.template !== undefined) {
          const t = d.templates.sourceInTx(orgId, req.template);
          source = t.source;
          template = t.template.id;
          // The template's disk holds a filesystem of its size: a machine may be larger, never smaller.
          if (req.size !== undefined && SIZE_RANK[req.size] < SIZE_RANK[t.template.size]) {
            throw new AppError('invalid_request', `Template ${t.template.id} needs at least size ${t.template.size}.`, {
              details: [{ field: 'size', message: `smaller than the template's size (${t.template.size})` }],
            });
          }
          size = req.size ?? t.template.size;
        }
        const row = admitInTx(orgId, by, { name: req.name, size, template, region: req.region ?? null, metadata: req.metadata, start: req.start }, {});
        return { row, source };
      });
      await launch(row, source, req.start, by);
      return current(orgId, row.id);
    },

    /**
     * A new machine whose disk is one of `id`'s snapshots, or `id`'s disk as it is now (captured first, and not
     * kept as a snapshot). Quotas as for create. The fork stands on the layer itself: deleting the parent or the
     * snapshot leaves it working.
     */
    async fork(p: Principal, id: string, req: ForkMachineRequest): Promise<Machine> {
      const orgId = p.org_id!;
      const by = actorOf(p);
      const { row, parent, snap } = store.db.tx(() => {
        const parent = load(orgId, id);
        let snap: { id: string; layer_id: string } | null = null;
        if (req.snapshot_id !== undefined) {
          snap = d.snapshots.readyOfMachineInTx(orgId, parent.id, req.snapshot_id);
        } else if (parent.state !== 'running' && parent.state !== 'stopped') {
          throw new AppError('conflict', `Cannot fork a machine that is ${parent.state} without a snapshot_id; it must be running or stopped.`);
        }
        const row = admitInTx(orgId, by, {
          name: req.name, size: parent.size, template: parent.template, region: parent.region, metadata: {}, start: true,
        }, { forked_from: parent.id, snapshot_id: snap?.id ?? null });
        return { row, parent, snap };
      });
      // The new machine's id holds a pin on the layer until its disk stands on it (so a snapshot deleted
      // meanwhile cannot free it), then lets go; the reconciler releases it if this process dies in between.
      await d.snapshots.holding(row.id, async () => {
        let layerId: string;
        try {
          if (snap) {
            layerId = snap.layer_id;
            await substrate.pinLayer(layerId, row.id);
          } else {
            layerId = (await locks.run(parent.id, () => substrate.capture(parent.id, row.id))).layerId;
          }
        } catch (e) {
          fail(row, 'creating', 'fork', e);
          throw new AppError('compute_unavailable', 'The machine could not be forked.', { headers: { 'retry-after': '5' } });
        }
        try {
          await launch(row, { kind: 'layer', layerId }, true, by);
        } finally {
          await substrate.releaseLayer(layerId, row.id).catch((e) => d.onFailure?.(row.id, 'layer_release', e));
        }
      });
      return current(orgId, row.id);
    },

    /**
     * Restore onto one of the machine's snapshots. Refused while any session holds the input lease. The current
     * disk is captured first ("Before restore", origin stop: the restore stops the machine and captures it; taken
     * even at the snapshot limit, since the spec's only condition is the lease, and counted from then on); a
     * running machine is stopped, gets the restored disk and is started again; a stopped one boots into it at its
     * next start. Open agent connections drop (the gateway ends screen and terminal streams on
     * machine.restore_started).
     */
    async restore(p: Principal, id: string, req: RestoreMachineRequest): Promise<Machine> {
      const orgId = p.org_id!;
      const by = actorOf(p);
      const { m, target, before } = store.db.tx(() => {
        const m = load(orgId, id);
        const dec = decide(m.state, 'restore');
        if (!dec.ok) throw new AppError('conflict', conflictMessage(m.state, 'restore'));
        const target = d.snapshots.readyOfMachineInTx(orgId, m.id, req.snapshot_id);
        // Someone is driving the desktop: restoring under them would pull the disk from beneath their work.
        const lease = store.leases.get(m.id);
        if (d.leases.isHeld(m.id) && lease?.session_id) {
          throw new AppError('conflict', `The input lease is held by session ${lease.session_id}; release it before restoring.`, {
            details: [{ field: 'snapshot_id', message: `input lease held by ${lease.session_id}` }],
          });
        }
        events.append(orgId, m.id, 'machine.restore_started', { snapshot_id: target.id, from: m.state, by });
        const before = d.snapshots.beginInTx(m, 'stop', 'Before restore', by, { admit: 'subscription' });
        transition(m, 'restore');
        return { m, target, before };
      });
      const wasRunning = m.state === 'running';
      await d.snapshots.holding(m.id, () =>
        locks.run(m.id, async () => {
          let stage = 'stop';
          try {
            await substrate.pinLayer(target.layer_id, m.id);
            if (wasRunning) {
              d.pool.drop(m.id);
              await substrate.stop(m.id);
              d.pool.drop(m.id);
            }
            stage = 'capture';
            const saved = await d.snapshots.captureNow(before);
            if (saved.state !== 'ready') throw new AppError('compute_unavailable', 'the current disk could not be captured');
            stage = 'replace';
            await substrate.replaceDisk(m.id, { kind: 'layer', layerId: target.layer_id });
          } catch (e) {
            d.onFailure?.(m.id, `restore_${stage}`, e);
            const code = e instanceof AppError ? e.code : 'internal_error';
            store.db.tx(() => events.append(orgId, m.id, 'machine.restore_failed', { snapshot_id: target.id, stage, code }));
            // Before the disk was replaced nothing is lost: a machine that was running is brought back as it was.
            if (wasRunning) await bootAfterRestore(m, by).catch(() => {});
            throw new AppError('compute_unavailable', 'The machine could not be restored; its disk is unchanged.', { headers: { 'retry-after': '5' } });
          } finally {
            await substrate.releaseLayer(target.layer_id, m.id).catch(() => {});
          }
          if (wasRunning) await bootAfterRestore(m, by);
          store.db.tx(() => events.append(orgId, m.id, 'machine.restore_completed', { snapshot_id: target.id, before_snapshot_id: before.id, by }));
        }),
      );
      return current(orgId, m.id);
    },

    update(p: Principal, id: string, req: UpdateMachineRequest): Machine {
      const orgId = p.org_id!;
      return store.db.tx(() => {
        const m = load(orgId, id);
        if (m.state === 'deleting') throw new AppError('conflict', 'The machine is being deleted.');
        const name = req.name ?? m.name;
        if (name !== m.name && store.machines.nameTaken(orgId, name, m.id)) {
          throw new AppError('conflict', `A machine named ${name} already exists.`, { details: [{ field: 'name', message: 'already in use' }] });
        }
        const metadata = req.metadata !== undefined ? JSON.stringify(req.metadata) : m.metadata;
        store.machines.update(m.id, { name, metadata }, at());
        events.append(orgId, m.id, 'machine.updated', {
          fields: [...(req.name !== undefined ? ['name'] : []), ...(req.metadata !== undefined ? ['metadata'] : [])], by: actorOf(p),
        });
        return machineView(load(orgId, id));
      });
    },

    async stop(p: Principal, id: string): Promise<Machine> {
      const by = actorOf(p);
      const m = store.db.tx(() => {
        const m = load(p.org_id!, id);
        transition(m, 'stop');
        d.leases.releaseInTx(m.org_id, m.id, 'machine_stopped', by);
        return m;
      });
      await runStop(m, 'stop', by);
      return current(p.org_id!, id);
    },

    async start(p: Principal, id: string): Promise<Machine> {
      const by = actorOf(p);
      const m = store.db.tx(() => {
        const m = load(p.org_id!, id);
        const dec = decide(m.state, 'start');
        if (!dec.ok) throw new AppError('conflict', conflictMessage(m.state, 'start'));
        reserveCompute(m.org_id, m.size);
        d.hostHealth?.checkReserve();
        transition(m, 'start');
        return m;
      });
      await runStart(m, by);
      return current(p.org_id!, id);
    },

    /** A stop followed by a start; each half is its own compare-and-set. */
    async restart(p: Principal, id: string): Promise<Machine> {
      const by = actorOf(p);
      const m = store.db.tx(() => {
        const m = load(p.org_id!, id);
        transition(m, 'restart');
        d.leases.releaseInTx(m.org_id, m.id, 'machine_restarted', by);
        return m;
      });
      await runStop(m, 'restart', by);
      store.db.tx(() => {
        const now = load(p.org_id!, id);
        if (now.state !== 'stopped') throw raced(id);
        // The stop released the machine's room: the start half is admitted like any start.
        reserveCompute(now.org_id, now.size);
        transition(now, 'start');
      });
      await runStart(m, by);
      return current(p.org_id!, id);
    },

    /**
     * Destroys the disk; its snapshots survive (and keep counting). Allowed from creating, starting and
     * stopping too: the act in flight finishes first (disk lock), then finds the row moved and reports it.
     */
    async remove(p: Principal, id: string): Promise<void> {
      const by = actorOf(p);
      const { m, from } = store.db.tx(() => {
        const m = load(p.org_id!, id);
        const from = m.state;
        transition(m, 'delete');
        d.leases.releaseInTx(m.org_id, m.id, 'machine_deleted', by);
        d.sessions.closeAllInTx(m.org_id, m.id, 'machine_deleted');
        // A machine's secrets go with the decision to delete it, not with its disk.
        store.secrets.removeAllForMachine(m.id);
        return { m, from };
      });
      d.pool.drop(m.id);
      try {
        // After whatever act is in flight on the disk (a create, start, stop or capture decided before this).
        await locks.run(m.id, () => {
          faultPoint('machines.delete.before_destroy');
          return substrate.destroy(m.id);
        });
      } catch (e) {
        fail(m, 'deleting', 'delete', e);
        throw new AppError('compute_unavailable', 'The machine could not be deleted; it is now in error and can be deleted again.');
      }
      store.db.tx(() => {
        if (store.machines.markDeleted(m.id, at())) events.append(m.org_id, m.id, 'machine.deleted', { from, by });
      });
    },

    /**
     * Settles machines a previous run left in transient states, and running machines the host lost.
     * Run once at start; `before` (the start time) keeps it off machines this run is already moving.
     */
    async reconcile(opts: { before?: string } = {}): Promise<Array<{ id: string; from: MachineState; to: MachineState | 'deleted' }>> {
      // Only what the previous run left: a machine this run moved since it started has a live caller.
      const before = opts.before ?? at();
      const out: Array<{ id: string; from: MachineState; to: MachineState | 'deleted' }> = [];
      let seen: Map<string, string>;
      try {
        seen = new Map((await substrate.reattach()).map((x) => [x.id, x.status]));
      } catch (e) {
        d.onFailure?.('*', 'reattach', e);
        seen = new Map();
      }
      // Every row, resting ones too: a stopped machine whose create a crash interrupted has no disk at all.
      const rows = store.machines.inStates(['creating', 'starting', 'stopping', 'deleting', 'running', 'stopped', 'error']).filter((m) => m.state_changed_at < before);
      for (const m of rows) {
        let status = seen.get(m.id);
        if (status === undefined) status = await substrate.status(m.id).catch(() => 'lost');
        const from = m.state;
        let recovered = false;
        const lostIt = (op: string) => fail(m, from, op, new AppError('compute_unavailable', 'lost by the host'));
        try {
          if ((from === 'stopped' || from === 'creating') && status === 'absent') {
            // The create never reached the substrate (or never finished its disk): clean whatever part of it
            // exists and say so; a start then answers 409 (delete and create again), never a 503 to retry.
            await substrate.destroy(m.id).catch((e) => d.onFailure?.(m.id, 'reconcile_cleanup', e));
            store.db.tx(() => {
              if (!store.machines.casState(m.id, from, decideTo(from, 'fail'), at())) return;
              events.append(m.org_id, m.id, 'machine.failed', {
                from, to: 'error', operation: 'create', code: 'conflict', reason: 'create_interrupted', reconciled: true,
              });
            });
          } else if (from === 'stopped' || from === 'error') {
            // Resting: nothing to settle.
          } else if (from === 'deleting') {
            await substrate.destroy(m.id);
            store.db.tx(() => {
              if (store.machines.markDeleted(m.id, at())) events.append(m.org_id, m.id, 'machine.deleted', { by: SYSTEM, reconciled: true });
            });
            out.push({ id: m.id, from, to: 'deleted' });
            continue;
          }
          if (from === 'stopping') {
            if (status === 'running') await substrate.stop(m.id);
            if (status === 'lost' || status === 'absent') lostIt('stop');
            else settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by: SYSTEM, reconciled: true });
          } else if (from === 'creating' || from === 'starting') {
            if (status === 'running') {
              if (settle(m, from, from === 'creating' ? 'substrate_running' : 'boot_complete', 'machine.started', { by: SYSTEM, reconciled: true })) watchReady(m);
            }
            else lostIt(from === 'creating' ? 'create' : 'start');
          } else if (from === 'running' && status !== 'running') {
            if (status === 'absent') lostIt('run');
            else recovered = await recoverLost(m);
          }
        } catch (e) {
          fail(m, from, 'reconcile', e);
        }
        const after = store.machines.byId(m.id);
        if (after && (after.state !== from || recovered)) out.push({ id: m.id, from, to: after.state });
      }
      // Captures a previous run left pending, and layer pins nothing holds any more.
      await d.snapshots.reconcile(before);
      return out;
    },

    watchPass,

    /** The substrate could not be prepared (main.ts): host.unhealthy to every live machine. */
    substrateUnavailable(): void {
      d.hostHealth?.substrateAnswered(false);
    },

    /**
     * Watch the substrate: every `intervalMs` (default 2 s, so a machine killed from outside is `error`
     * within about 2 s plus one probe) the running machines are checked. Returns the stop function.
     */
    startWatch(intervalMs = WATCH_INTERVAL_MS): () => void {
      let stopped = false;
      let timer: NodeJS.Timeout | null = null;
      const loop = () => {
        if (stopped) return;
        void watchPass()
          .catch((e) => d.onFailure?.('*', 'watch', e))
          .finally(() => {
            if (!stopped) timer = setTimeout(loop, intervalMs).unref();
          });
      };
      timer = setTimeout(loop, intervalMs).unref();
      return () => {
        stopped = true;
        if (timer) clearTimeout(timer);
      };
    },

    /** The running machine's agent, or why it cannot be reached. */
    agentTarget(orgId: string, id: string): { id: string; token: string } {
      const m = load(orgId, id);
      if (m.state === 'running') return { id: m.id, token: m.agent_token };
      if (isTransient(m.state) && m.state !== 'deleting' && m.state !== 'stopping') {
        throw new AppError('compute_unavailable', `The machine is ${m.state}; retry shortly.`, { headers: { 'retry-after': '2' } });
      }
      throw new AppError('conflict', `The machine is ${m.state}; it must be running.`);
    },

    /** One request to the machine's agent (the proxy routes use this). */
    async callAgent(orgId: string, id: string, req: AgentRequest): Promise<AgentResponse> {
      const t = this.agentTarget(orgId, id);
      return d.pool.request(t.id, t.token, req);
    },

    /** Stops every running machine of an organization whose account stopped granting compute. */
    async stopAllFor(orgId: string): Promise<void> {
      const running = store.machines.inStates(['running']).filter((m) => m.org_id === orgId);
      for (const m of running) {
        try {
          const moved = store.db.tx(() => {
            const now = store.machines.byId(m.id);
            if (!now || now.state !== 'running') return false;
            transition(now, 'stop');
            d.leases.releaseInTx(m.org_id, m.id, 'billing', SYSTEM);
            return true;
          });
          if (!moved) continue;
          await runStop(m, 'stop', SYSTEM);
          // The spec: machines stopped by the billing state keep their disks captured. Taken after the clean
          // shutdown (a consistent disk), without the snapshot quota (the account grants nothing now).
          const snap = store.db.tx(() => {
            const now = store.machines.byId(m.id);
            return now && now.state === 'stopped' ? d.snapshots.beginInTx(now, 'stop', 'Stopped by billing', SYSTEM, { admit: 'system' }) : null;
          });
          if (snap) await d.snapshots.capture(snap);
        } catch (e) {
          d.onFailure?.(m.id, 'billing_stop', e);
        }
      }
    },
  };
}
export type MachineService = ReturnType<typeof createMachineService>;

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
import { AgentPool, type AgentRequest, type AgentResponse } from '../agent-client/pool.js';
import type { Principal } from '../context.js';
import { CATALOG, catalogAt, type CatalogVersion } from '../domain/catalog.js';
import { conflictMessage, decide, isTransient, type LifecycleTrigger } from '../domain/machine-lifecycle.js';
import { pageOf } from '../store/pagination.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { resourcesForSize, type Substrate } from '../substrate/substrate.js';
import { actorOf, SYSTEM } from './actor.js';
import type { BillingService } from './billing.js';
import type { Actor, EventService } from './events.js';
import type { LeaseService } from './leases.js';
import type { QuotaService } from './quotas.js';
import type { SessionService } from './sessions.js';

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
  now: () => Date;
  catalog?: readonly CatalogVersion[];
  /** Log a substrate failure's cause for the operator (never a path or token in the API answer). */
  onFailure?: (machineId: string, op: string, cause: unknown) => void;
  /** How `machine.ready` is detected after a boot: the agent's /display polled until `up` (false: never). */
  readyProbe?: { intervalMs: number; timeoutMs: number } | false;
  /** Guest networking of new machines (the operator's MACHINE_NETWORK; default none). */
  network?: 'outbound' | 'none';
}

const DEFAULT_READY_PROBE = { intervalMs: 1_000, timeoutMs: 180_000 };

export function createMachineService(d: MachineServiceDeps) {
  const { store, substrate, events } = d;
  const catalog = d.catalog ?? CATALOG;
  const at = () => d.now().toISOString();

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

  function compute(orgId: string): void {
    d.quotas.check(orgId, 'running_machines');
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

  async function runStart(m: MachineRow, by: Actor): Promise<void> {
    try {
      await substrate.start(m.id);
    } catch (e) {
      fail(m, 'starting', 'start', e);
      throw new AppError('compute_unavailable', 'The machine failed to start.', { headers: { 'retry-after': '5' } });
    }
    if (!settle(m, 'starting', 'boot_complete', 'machine.started', { by })) throw raced(m.id);
    watchReady(m);
  }

  async function runStop(m: MachineRow, trigger: 'stop' | 'restart', by: Actor): Promise<void> {
    d.pool.drop(m.id);
    try {
      await substrate.stop(m.id);
    } catch (e) {
      fail(m, 'stopping', trigger, e);
      throw new AppError('compute_unavailable', 'The machine failed to stop.', { headers: { 'retry-after': '5' } });
    }
    d.pool.drop(m.id);
    if (!settle(m, 'stopping', 'shutdown_complete', 'machine.stopped', { by })) throw raced(m.id);
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
        up = r.status === 200 && (JSON.parse(r.body.toString('utf8')) as { up?: unknown }).up === true;
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
    get: (orgId: string, id: string): Machine => current(orgId, id),

    list(orgId: string, q: MachineListQuery): Page<Machine> {
      return pageOf(q, (after, limit) => store.machines.page(orgId, after, limit, q.state ?? null), machineView);
    },

    /** Returns once the machine is running (or, with start:false, once it exists stopped). */
    async create(p: Principal, req: CreateMachineRequest): Promise<Machine> {
      const orgId = p.org_id!;
      if (req.template !== undefined) {
        // Templates arrive with the snapshots issue; until then no template id exists.
        throw new AppError('not_found', 'No such template.', { details: [{ field: 'template', message: 'no such template' }] });
      }
      const by = actorOf(p);
      const resources = resourcesForSize(req.size, catalogAt(d.now(), catalog).sizes);
      const row = store.db.tx(() => {
        d.quotas.check(orgId, 'machines');
        if (req.start) compute(orgId);
        checkSize(orgId, req.size);
        if (req.name !== undefined && store.machines.nameTaken(orgId, req.name)) {
          throw new AppError('conflict', `A machine named ${req.name} already exists.`, { details: [{ field: 'name', message: 'already in use' }] });
        }
        const dec = decide(null, req.start ? 'create' : 'create_stopped');
        if (!dec.ok) throw new AppError('internal_error', 'The transition table does not allow creating a machine.');
        const t = at();
        const m: MachineRow = {
          id: newId('machine'), org_id: orgId, name: req.name ?? generateName(orgId), size: req.size,
          template: null, region: req.region ?? null, metadata: JSON.stringify(req.metadata), state: dec.to,
          agent_token: randomBytes(32).toString('base64url'), created_by_kind: by.type, created_by_id: by.id,
          created_at: t, updated_at: t, state_changed_at: t, deleted_at: null,
        };
        store.machines.insert(m);
        events.append(orgId, m.id, 'machine.created', { to: dec.to, size: m.size, by });
        return m;
      });
      try {
        await substrate.create({ id: row.id, resources, source: { kind: 'base' }, token: row.agent_token, network: d.network ?? 'none' }, { start: req.start });
      } catch (e) {
        if (!req.start) {
          // Nothing exists on the host: the create did not happen.
          d.onFailure?.(row.id, 'create', e);
          await substrate.destroy(row.id).catch(() => {});
          store.db.tx(() => store.machines.removeRow(row.id));
          throw new AppError('compute_unavailable', 'The machine could not be created.', { headers: { 'retry-after': '5' } });
        }
        fail(row, 'creating', 'create', e);
        throw new AppError('compute_unavailable', 'The machine failed to start.', { headers: { 'retry-after': '5' } });
      }
      if (req.start) {
        if (!settle(row, 'creating', 'substrate_running', 'machine.started', { by })) throw raced(row.id);
        watchReady(row);
      }
      return current(orgId, row.id);
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
        compute(m.org_id);
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
        transition(now, 'start');
      });
      await runStart(m, by);
      return current(p.org_id!, id);
    },

    /** Destroys the disk. Snapshots (later issue) survive. */
    async remove(p: Principal, id: string): Promise<void> {
      const by = actorOf(p);
      const { m, from } = store.db.tx(() => {
        const m = load(p.org_id!, id);
        const from = m.state;
        transition(m, 'delete');
        d.leases.releaseInTx(m.org_id, m.id, 'machine_deleted', by);
        d.sessions.closeAllInTx(m.org_id, m.id, 'machine_deleted');
        return { m, from };
      });
      d.pool.drop(m.id);
      try {
        await substrate.destroy(m.id);
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
      const rows = store.machines.inStates(['creating', 'starting', 'stopping', 'deleting', 'running']).filter((m) => m.state_changed_at < before);
      for (const m of rows) {
        let status = seen.get(m.id);
        if (status === undefined) status = await substrate.status(m.id).catch(() => 'lost');
        const from = m.state;
        const lostIt = (op: string) => fail(m, from, op, new AppError('compute_unavailable', 'lost by the host'));
        try {
          if (from === 'deleting') {
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
            lostIt('run');
          }
        } catch (e) {
          fail(m, from, 'reconcile', e);
        }
        const after = store.machines.byId(m.id);
        if (after && after.state !== from) out.push({ id: m.id, from, to: after.state });
      }
      return out;
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
          if (moved) await runStop(m, 'stop', SYSTEM);
        } catch (e) {
          d.onFailure?.(m.id, 'billing_stop', e);
        }
      }
    },
  };
}
export type MachineService = ReturnType<typeof createMachineService>;

/** Where no substrate was configured (identity-only deployments and tests): every act is refused. */
export const NO_SUBSTRATE: Substrate = {
  kind: 'fake',
  create: () => Promise.reject(unconfigured()),
  start: () => Promise.reject(unconfigured()),
  stop: () => Promise.reject(unconfigured()),
  status: async () => 'absent',
  capture: () => Promise.reject(unconfigured()),
  replaceDisk: () => Promise.reject(unconfigured()),
  destroy: async () => {},
  openChannel: () => Promise.reject(unconfigured()),
  channelPath: () => '',
  diskUsage: () => Promise.reject(unconfigured()),
  reattach: async () => [],
};

function unconfigured(): AppError {
  return new AppError('compute_unavailable', 'No machine substrate is configured on this deployment.');
}

/**
 * The shared core of every machine operation: decide and record (one transaction: domain/machine-lifecycle.ts
 * decides, the row moves by compare-and-set on the state that was read, the event is appended) → act on the
 * substrate (async, outside any transaction) → record the outcome, again compare-and-set on the state the call
 * put there. Of two concurrent lifecycle calls exactly one moves the row; the other gets 409 naming both states.
 * A substrate failure lands the machine in `error` with a `machine.failed` event.
 */
import { AppError } from '../../../../shared/errors.js';
import type { Machine, MachineState } from '../../../../shared/schemas/machine.js';
import type { CommitRatios, Resources } from '../../domain/capacity.js';
import { CATALOG, type CatalogVersion } from '../../domain/catalog.js';
import { conflictMessage, decide, type LifecycleTrigger } from '../../domain/machine-lifecycle.js';
import type { HostFence, MachineWriteGuard } from '../../store/repos/hosts.js';
import type { MachineRow } from '../../store/repos/machines.js';
import type { Store } from '../../store/store.js';
import type { Substrate } from '../../substrate/substrate.js';
import type { BillingService } from '../billing.js';
import type { DiskLocks } from '../disk-locks.js';
import type { EventService } from '../events.js';
import type { HostFenceHolder } from '../host-fence.js';
import type { HostHealth } from '../host-health.js';
import type { LeaseService } from '../leases.js';
import type { StartElsewhere } from '../start-elsewhere.js';
import type { ParentDisk } from '../live-fork.js';
import type { MachineAgent } from '../machine-agent/index.js';
import type { QuotaService } from '../quotas.js';
import type { SessionService } from '../sessions.js';
import type { SnapshotService } from '../snapshots.js';
import type { TemplateService } from '../templates.js';
import { ERRORS } from '../../errors.js';
import type { WarmPoolConfig } from './pool-ledger.js';

export interface MachineServiceDeps {
  store: Store;
  substrate: Substrate;
  /** The machines' agents (services/machine-agent): readiness probes, and sessions dropped when a run ends. */
  agent: MachineAgent;
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
  /**
   * The registered host this process drives (cluster/host-id.ts): admissions lock its row and re-check the fit there
   * (services/placement.ts). Absent or not registered: no registry, capacity above applies and host_id stays null.
   */
  hostId?: string | null;
  /** Refuses new work while the host is below its disk reserve; checked by the substrate watch. */
  hostHealth?: HostHealth;
  /** Guest networking of new machines (the operator's MACHINE_NETWORK; default none). */
  network?: 'outbound' | 'none';
  /** The warm pool (services/machines/warm-pool.ts); absent: none. */
  warmPool?: WarmPoolConfig;
  /** The host driver's fence every machine state write carries (services/host-fence.ts); absent or empty: none. */
  hostFence?: HostFenceHolder;
  /**
   * A live fork's parent's host, when that is another host (services/live-fork.ts): its capture asked of it. Absent:
   * a live fork placed here while its parent is elsewhere is refused (503) before anything is recorded.
   */
  parentDisk?: ParentDisk | null;
  /**
   * A start this host has no room for, moved to a host with room and started there (services/start-elsewhere.ts);
   * read when a start asks (it is made after this service). Absent or null: the start answers 503 as before.
   */
  elsewhere?: () => StartElsewhere | null;
}

export function machineView(m: MachineRow): Machine {
  // An allow-list of fields: the agent token (and anything substrate-side) can never leak by accident.
  return {
    id: m.id, name: m.name, size: m.size, template: m.template, region: m.region,
    metadata: JSON.parse(m.metadata) as Record<string, string>, state: m.state,
    created_at: m.created_at, updated_at: m.updated_at, state_changed_at: m.state_changed_at,
  };
}

/** The event an outcome records, if any. */
export type OutcomeEvent = 'machine.started' | 'machine.stopped' | null;

export interface MachineCore {
  d: MachineServiceDeps;
  catalog: readonly CatalogVersion[];
  at: () => string;
  /** The fence this process's state writes carry (null: none; services/host-fence.ts). */
  fence(): HostFence | null;
  /** The rows this process's host holds: with a fence, those on its host (or on none); without one, all. */
  onThisHost(rows: MachineRow[]): MachineRow[];
  load(orgId: string, id: string): Promise<MachineRow>;
  current(orgId: string, id: string): Promise<Machine>;
  /** `guard`: the condition the write carries instead of this process's fence (LOST_HOST: the machine's host is down). */
  transition(m: MachineRow, trigger: LifecycleTrigger, guard?: MachineWriteGuard): Promise<MachineState>;
  /** Whether `m` is recorded on a host that is down (its driver gone: only a delete acts on it, lifecycle.ts). */
  onLostHost(m: MachineRow): Promise<boolean>;
  /** The moved row as stored (an answer may be made from it), or null when someone else moved it first. */
  settle(m: MachineRow, from: MachineState, trigger: LifecycleTrigger, event: OutcomeEvent, data?: Record<string, unknown>): Promise<MachineRow | null>;
  decideTo(from: MachineState, trigger: LifecycleTrigger): MachineState;
  fail(m: MachineRow, from: MachineState, op: string, cause: unknown): Promise<void>;
  raced(id: string): Promise<AppError>;
}

export function createMachineCore(d: MachineServiceDeps): MachineCore {
  const { store, events } = d;
  const at = () => d.now().toISOString();
  const fence = () => d.hostFence?.current ?? null;

  async function load(orgId: string, id: string): Promise<MachineRow> {
    const m = await store.machines.inOrg(orgId, id);
    if (!m) throw ERRORS.noSuchMachine();
    return m;
  }

  return {
    d,
    catalog: d.catalog ?? CATALOG,
    at,
    fence,
    onThisHost(rows) {
      const f = fence();
      return f ? rows.filter((m) => m.host_id === f.hostId || m.host_id === null) : rows;
    },
    load,
    onLostHost: async (m) => m.host_id !== null && (await store.hosts.get(m.host_id))?.state === 'down',
    current: async (orgId, id) => machineView(await load(orgId, id)),

    /**
     * Decide and record one transition. Inside a transaction; throws 409 naming both states when the
     * stored state does not allow it or moved under us.
     */
    async transition(m, trigger, guard) {
      const dec = decide(m.state, trigger);
      if (!dec.ok) throw ERRORS.machineStateConflict(conflictMessage(m.state, trigger));
      const g = guard ?? fence();
      if (!(await store.machines.casState(m.id, m.state, dec.to, at(), g))) {
        const now = await store.machines.byId(m.id);
        // Unmoved, so the guard refused it: this process no longer drives the machine's host, or it is no longer down.
        if (g && now?.state === m.state) throw ERRORS.machineHostChangedHands();
        throw ERRORS.machineStateConflict(now ? conflictMessage(now.state, trigger) : 'The machine was deleted.');
      }
      return dec.to;
    },

    /** Record an outcome with compare-and-set on the state this call put there; null if someone else moved it. */
    settle(m, from, trigger, event, data = {}) {
      return store.db.tx(async () => {
        const dec = decide(from, trigger);
        if (!dec.ok) return null;
        const moved = await store.machines.casState(m.id, from, dec.to, at(), fence());
        if (!moved) return null;
        if (event) await events.append(m.org_id, m.id, event, { from, to: dec.to, ...data });
        return moved;
      });
    },

    /** The table's target for a move the caller knows is legal (a table edit that breaks it fails loudly). */
    decideTo(from, trigger) {
      const dec = decide(from, trigger);
      if (!dec.ok) throw ERRORS.transitionNotAllowed(trigger, from);
      return dec.to;
    },

    async fail(m, from, op, cause) {
      d.onFailure?.(m.id, op, cause);
      await store.db.tx(async () => {
        if (!decide(from, 'fail').ok) return;
        if (!(await store.machines.casState(m.id, from, 'error', at(), fence()))) return;
        // Only the operation and the error code reach the event: causes can name host paths.
        const code = cause instanceof AppError ? cause.code : 'internal_error';
        await events.append(m.org_id, m.id, 'machine.failed', { from, to: 'error', operation: op, code });
      });
      d.agent.drop(m.id);
    },

    async raced(id) {
      const now = await store.machines.byId(id);
      return ERRORS.machineChangedState(now?.state ?? 'deleted');
    },
  };
}

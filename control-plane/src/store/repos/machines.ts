/**
 * Machines, sessions, input leases and machine events. Every state move is compare-and-set on the
 * value that was read (`changes` 0 means someone else moved the row first).
 */
import { EVENT_TYPES, type MachineSize, type MachineState } from '../../../../shared/schemas/machine.js';
import { publishEvents } from '../events-publish.js';
import type { LeaseRow } from '../../domain/lease.js';
import type { Db } from '../db.js';
import { guarded, type MachineWriteGuard } from './hosts.js';
import type { Keyset } from '../pagination.js';
import { dialect } from './dialect.js';
import { changes, one, type Changes } from './results.js';

export interface MachineRow {
  id: string;
  org_id: string;
  name: string;
  size: MachineSize;
  template: string | null;
  region: string | null;
  /** JSON object of strings. */
  metadata: string;
  state: MachineState;
  /** The guest agent's bearer token. Never leaves the control plane except towards the agent. */
  agent_token: string;
  created_by_kind: 'user' | 'api_key';
  created_by_id: string;
  created_at: string;
  updated_at: string;
  state_changed_at: string;
  deleted_at: string | null;
  /** The host whose substrate holds it (null: recorded before hosts existed; docs/operations.md, "Hosts"). */
  host_id: string | null;
}

export type SessionType = 'agent' | 'human' | 'view';
export type SessionState = 'active' | 'idle' | 'closed';

export interface SessionRow {
  id: string;
  org_id: string;
  machine_id: string;
  type: SessionType;
  state: SessionState;
  opener_kind: 'user' | 'api_key';
  opener_id: string;
  created_at: string;
  closed_at: string | null;
}

export interface EventRow {
  seq: number;
  id: string;
  org_id: string;
  machine_id: string;
  type: string;
  data: string;
  created_at: string;
}

/** States that hold compute (count against running_machines). */
export const COMPUTE_STATES: readonly MachineState[] = ['creating', 'starting', 'running', 'stopping'];

/**
 * Called inside the transaction that moved a machine (`to` null: the row was marked deleted), with the
 * state it left and the instant: metering closes the interval spent in `from` atomically with the move.
 * Hooks run one after another, each awaited, in the order they were registered.
 */
export type MoveHook = (m: MovedMachine, from: MachineState, to: MachineState | null, at: string) => Promise<void>;

/** What a move hook is told of the moved row (as the move's RETURNING gave it: no read of its own). */
export type MovedMachine = Pick<MachineRow, 'id' | 'org_id' | 'size' | 'created_at'>;

export function machinesRepo(db: Db) {
  const d = dialect(db.engine);
  const hooks: MoveHook[] = [];
  /** A compare-and-set that returned the moved row (none: someone moved it first), then the hooks. */
  const moved = async <M extends MovedMachine>(m: M | undefined, from: MachineState, to: MachineState | null, at: string): Promise<M | null> => {
    if (!m) return null;
    for (const h of hooks) await h(m, from, to, at);
    return m;
  };
  const count = async (orgId: string, states: readonly MachineState[] | null): Promise<number> =>
    (await db.q().selectFrom('machines').select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.and([eb('org_id', '=', orgId), eb('deleted_at', 'is', null), ...(states ? [eb('state', 'in', states)] : [])]))
      .executeTakeFirstOrThrow()).n;
  /**
   * The organization's live machines and, of them, those holding compute (COMPUTE_STATES), in one statement: the
   * `machines` and `running_machines` quotas' counts, which a create checks both of.
   */
  const countsOf = (orgId: string): Promise<{ live: number; compute: number }> =>
    db.q().selectFrom('machines')
      .select((eb) => [
        eb.fn.countAll<number>().as('live'),
        eb.fn.coalesce(eb.fn.sum<number>(eb.case().when('state', 'in', COMPUTE_STATES).then(1).else(0).end()), eb.lit(0)).as('compute'),
      ])
      .where('org_id', '=', orgId).where('deleted_at', 'is', null)
      .executeTakeFirstOrThrow();
  return {
    onMove(h: MoveHook): void {
      hooks.push(h);
    },
    async insert(m: MachineRow): Promise<void> {
      await db.q().insertInto('machines').values(m).execute();
    },
    /**
     * Inserts `m` unless a live machine of its organization already has its name (the partial unique index
     * `machines_org_name`, named as the conflict target): false then, nothing written. The name check and the
     * insert in one statement; a conflict on anything else (the primary key: a warm member's id) still throws.
     */
    insertUnlessNameTaken: async (m: MachineRow): Promise<boolean> =>
      (await db.q().insertInto('machines').values(m)
        .onConflict((oc) => oc.columns(['org_id', 'name']).where('deleted_at', 'is', null).doNothing())
        .returning('id').executeTakeFirst()) !== undefined,
    /** Live machines only: a deleted machine is gone for the API. */
    inOrg: (orgId: string, id: string): Promise<MachineRow | undefined> =>
      db.q().selectFrom('machines').selectAll().where('org_id', '=', orgId).where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst(),
    byId: (id: string): Promise<MachineRow | undefined> =>
      db.q().selectFrom('machines').selectAll().where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst(),
    /** Also a deleted machine (its snapshots outlive it and still need its size). */
    anyById: (id: string): Promise<MachineRow | undefined> => db.q().selectFrom('machines').selectAll().where('id', '=', id).executeTakeFirst(),
    nameTaken: async (orgId: string, name: string, exceptId = ''): Promise<boolean> =>
      (await db.q().selectFrom('machines').select('id').where('org_id', '=', orgId).where('name', '=', name).where('id', '!=', exceptId)
        .where('deleted_at', 'is', null).limit(1).executeTakeFirst()) !== undefined,
    page: (orgId: string, after: Keyset, limit: number, state: MachineState | null): Promise<MachineRow[]> =>
      db.q().selectFrom('machines').selectAll()
        .where((eb) => eb.and([eb('org_id', '=', orgId), eb('deleted_at', 'is', null), ...(state === null ? [] : [eb('state', '=', state)]), d.after(eb, after)]))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    /** Live machines in any of `states`, oldest first. */
    inStates: async (states: readonly MachineState[]): Promise<MachineRow[]> =>
      states.length === 0
        ? []
        : db.q().selectFrom('machines').selectAll().where('deleted_at', 'is', null).where('state', 'in', states)
          .orderBy('created_at', d.asc).orderBy('id', d.asc).execute(),
    countLive: async (orgId: string): Promise<number> => (await countsOf(orgId)).live,
    /** Machines holding compute on this host (every organization), per size: what admission control counts. */
    computeBySize: (): Promise<Array<{ size: MachineSize; n: number }>> =>
      db.q().selectFrom('machines').select((eb) => ['size', eb.fn.countAll<number>().as('n')]).where('deleted_at', 'is', null)
        .where('state', 'in', COMPUTE_STATES).groupBy('size').orderBy('size', d.asc).execute(),
    /** Live machines (every organization) per state, for the metrics. */
    countByState: (): Promise<Array<{ state: MachineState; n: number }>> =>
      db.q().selectFrom('machines').select((eb) => ['state', eb.fn.countAll<number>().as('n')]).where('deleted_at', 'is', null)
        .groupBy('state').orderBy('state', d.asc).execute(),
    countRunning: (orgId: string): Promise<number> => count(orgId, ['running']),
    countCompute: async (orgId: string): Promise<number> => (await countsOf(orgId)).compute,
    countsOf,
    /**
     * Compare-and-set: moves the row only if its state is still `from`. With a `fence` (the host driver's: services'
     * hostFence), also only while that driver still drives the machine's host (store/repos/hosts.ts `drivenUnder`; or, with `LOST_HOST`, only while its host is down):
     * a driver whose host was declared down or taken over changes no row.
     */
    /** The moved row as stored (its RETURNING: the caller may answer from it without reading it again), or null. */
    casState(id: string, from: MachineState, to: MachineState, at: string, fence: MachineWriteGuard | null = null): Promise<MachineRow | null> {
      return db.tx(async () => {
        let q = db.q().updateTable('machines').set({ state: to, state_changed_at: at, updated_at: at })
          .where('id', '=', id).where('state', '=', from).where('deleted_at', 'is', null);
        if (fence) q = q.where(guarded(fence));
        return moved(await q.returningAll().executeTakeFirst(), from, to, at);
      });
    },
    /** A delete's outcome: the row marked deleted; fenced like casState. */
    markDeleted(id: string, at: string, fence: MachineWriteGuard | null = null): Promise<boolean> {
      return db.tx(async () => {
        let q = db.q().updateTable('machines').set({ deleted_at: at, updated_at: at })
          .where('id', '=', id).where('state', '=', 'deleting').where('deleted_at', 'is', null);
        if (fence) q = q.where(guarded(fence));
        return (await moved(await q.returning(['id', 'org_id', 'size', 'created_at']).executeTakeFirst(), 'deleting', null, at)) !== null;
      });
    },
    /** Live machines recorded on `hostId` (every state, or those in `states`), oldest first. */
    onHost: (hostId: string, states: readonly MachineState[] | null = null): Promise<MachineRow[]> =>
      db.q().selectFrom('machines').selectAll()
        .where((eb) => eb.and([eb('host_id', '=', hostId), eb('deleted_at', 'is', null), ...(states ? [eb('state', 'in', states)] : [])]))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).execute(),
    /** Used only to undo an insert whose substrate create failed before anything existed. */
    removeRow(id: string): Promise<void> {
      return db.tx(async () => {
        await db.q().deleteFrom('machine_events').where('machine_id', '=', id).execute();
        await db.q().deleteFrom('machines').where('id', '=', id).execute();
      });
    },
    async update(id: string, fields: { name: string; metadata: string }, at: string): Promise<void> {
      await db.q().updateTable('machines').set({ name: fields.name, metadata: fields.metadata, updated_at: at }).where('id', '=', id).execute();
    },
  };
}

export function sessionsRepo(db: Db) {
  const d = dialect(db.engine);
  return {
    async insert(s: SessionRow): Promise<void> {
      await db.q().insertInto('sessions').values(s).execute();
    },
    inOrg: (orgId: string, id: string): Promise<SessionRow | undefined> =>
      db.q().selectFrom('sessions').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst(),
    byId: (id: string): Promise<SessionRow | undefined> => db.q().selectFrom('sessions').selectAll().where('id', '=', id).executeTakeFirst(),
    page: (orgId: string, after: Keyset, limit: number, f: { machine_id: string | null; state: SessionState | null }): Promise<SessionRow[]> =>
      db.q().selectFrom('sessions').selectAll()
        .where((eb) =>
          eb.and([
            eb('org_id', '=', orgId),
            ...(f.machine_id === null ? [] : [eb('machine_id', '=', f.machine_id)]),
            ...(f.state === null ? [] : [eb('state', '=', f.state)]),
            d.after(eb, after),
          ]),
        )
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    countOpen: async (orgId: string): Promise<number> =>
      (await db.q().selectFrom('sessions').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId)
        .where('state', '!=', 'closed').executeTakeFirstOrThrow()).n,
    /** A machine's open sessions, oldest first. */
    openOnMachine: (machineId: string): Promise<SessionRow[]> =>
      db.q().selectFrom('sessions').selectAll().where('machine_id', '=', machineId).where('state', '!=', 'closed')
        .orderBy('created_at', d.asc).orderBy('id', d.asc).execute(),
    async close(id: string, at: string): Promise<boolean> {
      return one(await db.q().updateTable('sessions').set({ state: 'closed', closed_at: at }).where('id', '=', id).where('state', '!=', 'closed').executeTakeFirst());
    },
    async setState(id: string, from: SessionState, to: SessionState): Promise<boolean> {
      return one(await db.q().updateTable('sessions').set({ state: to }).where('id', '=', id).where('state', '=', from).executeTakeFirst());
    },
    touch: async (id: string, at: string): Promise<Changes> =>
      changes(await db.q().updateTable('sessions').set({ last_active_at: at }).where('id', '=', id).where('state', '!=', 'closed').executeTakeFirst()),
    /** Every active session was in use at `at` (a sweep that saw them attached). */
    async touchActive(at: string): Promise<void> {
      await db.q().updateTable('sessions').set({ last_active_at: at }).where('state', '=', 'active').execute();
    },
    /**
     * Open sessions with when they were last in use, and whether they hold a live input lease now (`leased`: 1 or 0
     * on both engines), oldest first.
     */
    openWithActivity: (nowMs: number): Promise<Array<SessionRow & { last_active: string; leased: number }>> =>
      db.q().selectFrom('sessions as s').selectAll('s')
        .select((eb) => [
          eb.fn.coalesce('s.last_active_at', 's.created_at').as('last_active'),
          eb.case()
            .when(eb.exists(eb.selectFrom('input_leases as l').select('l.machine_id').whereRef('l.session_id', '=', 's.id').where('l.expires_at', '>', nowMs)))
            .then(eb.lit(1)).else(eb.lit(0)).end().as('leased'),
        ])
        .where('s.state', '!=', 'closed').orderBy('s.created_at', d.asc).orderBy('s.id', d.asc).execute(),
  };
}

export function leasesRepo(db: Db) {
  return {
    get: async (machineId: string): Promise<LeaseRow | null> =>
      (await db.q().selectFrom('input_leases').select(['machine_id', 'session_id', 'fence', 'expires_at']).where('machine_id', '=', machineId)
        .executeTakeFirst()) ?? null,
    /**
     * Compare-and-set on the fence that was read (`null`: no row existed, and the insert is ignored if one appeared
     * since). A renewal keeps the fence, so it also matches on the holder.
     */
    async put(machineId: string, read: LeaseRow | null, next: { session_id: string | null; fence: number; expires_at: number }, at: string): Promise<boolean> {
      if (!read) {
        return one(
          await db.q().insertInto('input_leases')
            .values({ machine_id: machineId, session_id: next.session_id, fence: next.fence, expires_at: next.expires_at, updated_at: at })
            .onConflict((oc) => oc.doNothing()).executeTakeFirst(),
        );
      }
      const holder = read.session_id;
      return one(
        await db.q().updateTable('input_leases')
          .set({ session_id: next.session_id, fence: next.fence, expires_at: next.expires_at, updated_at: at })
          .where((eb) => eb.and([eb('machine_id', '=', machineId), eb('fence', '=', read.fence), holder === null ? eb('session_id', 'is', null) : eb('session_id', '=', holder)]))
          .executeTakeFirst(),
      );
    },
  };
}

export function eventsRepo(db: Db) {
  return {
    /**
     * Records an event; its `seq` (strictly increasing, never reused). On PostgreSQL, through cluster/notify.ts in a
     * transaction (the caller's, else one of its own): seqs commit in order deployment-wide and every control-plane
     * process LISTENing is woken at the commit. SQLite has one writer and one process: a plain insert.
     */
    insert: async (e: Omit<EventRow, 'seq'>): Promise<number> =>
      db.engine === 'postgres'
        ? db.tx(async () => (await publishEvents(db.q(), [e]))[0]!)
        : (await db.q().insertInto('machine_events').values(e).returning('seq').executeTakeFirstOrThrow()).seq,
    /** Newest first: rows with seq below `before` (null: from the newest); the spec's types only (tenant reads). */
    pageDesc: (machineId: string, before: number | null, limit: number): Promise<EventRow[]> =>
      db.q().selectFrom('machine_events').selectAll().where('machine_id', '=', machineId).where('seq', '<', before ?? Number.MAX_SAFE_INTEGER).where('type', 'in', EVENT_TYPES)
        .orderBy('seq', 'desc').limit(limit).execute(),
    /** Oldest first: rows after `after` (for live subscribers catching up); the spec's types only. */
    after: (machineId: string, after: number, limit: number): Promise<EventRow[]> =>
      db.q().selectFrom('machine_events').selectAll().where('machine_id', '=', machineId).where('seq', '>', after).where('type', 'in', EVENT_TYPES)
        .orderBy('seq', 'asc').limit(limit).execute(),
    /** The newest seq of any machine (0: none yet): where a process's events feed starts. */
    headSeq: async (): Promise<number> =>
      (await db.q().selectFrom('machine_events').select((eb) => eb.fn.max('seq').as('s')).executeTakeFirst())?.s ?? 0,
    /** The machine's newest event of `type`, if any. */
    newestOfType: (machineId: string, type: string): Promise<EventRow | undefined> =>
      db.q().selectFrom('machine_events').selectAll().where('machine_id', '=', machineId).where('type', '=', type)
        .orderBy('seq', 'desc').limit(1).executeTakeFirst(),
    lastSeq: async (machineId: string): Promise<number> =>
      (await db.q().selectFrom('machine_events').select((eb) => eb.fn.max('seq').as('s')).where('machine_id', '=', machineId).executeTakeFirst())?.s ?? 0,
  };
}

/** Machines a disk-volume recovery stopped and owes a start (migration 9). */
export function volumeRestartsRepo(db: Db) {
  const d = dialect(db.engine);
  return {
    add: async (machineId: string): Promise<Changes> =>
      changes(await db.q().insertInto('volume_restarts').values({ machine_id: machineId, stopped_at: null }).onConflict((oc) => oc.doNothing()).executeTakeFirst()),
    stopped: async (machineId: string, at: string): Promise<Changes> =>
      changes(await db.q().updateTable('volume_restarts').set({ stopped_at: at }).where('machine_id', '=', machineId).executeTakeFirst()),
    all: (): Promise<Array<{ machine_id: string; stopped_at: string | null }>> =>
      db.q().selectFrom('volume_restarts').select(['machine_id', 'stopped_at']).orderBy('machine_id', d.asc).execute(),
    /** Whether any start is owed (the substrate watch asks every pass). */
    any: async (): Promise<boolean> => (await db.q().selectFrom('volume_restarts').select('machine_id').limit(1).executeTakeFirst()) !== undefined,
    forget: async (machineId: string): Promise<Changes> =>
      changes(await db.q().deleteFrom('volume_restarts').where('machine_id', '=', machineId).executeTakeFirst()),
  };
}

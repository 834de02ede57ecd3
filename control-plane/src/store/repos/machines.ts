/**
 * Machines, sessions, input leases and machine events. Every state move is compare-and-set on the
 * value that was read (`changes` 0 means someone else moved the row first).
 */
import type { MachineSize, MachineState } from '../../../../shared/schemas/machine.js';
import type { LeaseRow } from '../../domain/lease.js';
import type { Db } from '../db.js';
import { afterSql, type Keyset } from '../pagination.js';

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
 * Called (and awaited, in the order registered) inside the transaction that moved a machine (`to` null: the row was marked deleted), with the
 * state it left and the instant: metering closes the interval spent in `from` atomically with the move.
 */
export type MoveHook = (m: { id: string; org_id: string; size: MachineSize }, from: MachineState, to: MachineState | null, at: string) => Promise<void>;

export function machinesRepo(db: Db) {
  const inList = COMPUTE_STATES.map((s) => `'${s}'`).join(',');
  const hooks: MoveHook[] = [];
  const moved = async (id: string, from: MachineState, to: MachineState | null, at: string) => {
    if (!hooks.length) return;
    const m = await db.get<{ id: string; org_id: string; size: MachineSize }>('SELECT id, org_id, size FROM machines WHERE id = ?', [id]);
    if (m) for (const h of hooks) await h(m, from, to, at);
  };
  return {
    onMove(h: MoveHook): void {
      hooks.push(h);
    },
    async insert(m: MachineRow): Promise<void> {
      await db.run(
        `INSERT INTO machines (id,org_id,name,size,template,region,metadata,state,agent_token,created_by_kind,created_by_id,created_at,updated_at,state_changed_at,deleted_at)
         VALUES (@id,@org_id,@name,@size,@template,@region,@metadata,@state,@agent_token,@created_by_kind,@created_by_id,@created_at,@updated_at,@state_changed_at,@deleted_at)`,
        { ...m },
      );
    },
    /** Live machines only: a deleted machine is gone for the API. */
    inOrg: (orgId: string, id: string) =>
      db.get<MachineRow>('SELECT * FROM machines WHERE org_id = ? AND id = ? AND deleted_at IS NULL', [orgId, id]),
    byId: (id: string) => db.get<MachineRow>('SELECT * FROM machines WHERE id = ? AND deleted_at IS NULL', [id]),
    /** Also a deleted machine (its snapshots outlive it and still need its size). */
    anyById: (id: string) => db.get<MachineRow>('SELECT * FROM machines WHERE id = ?', [id]),
    nameTaken: async (orgId: string, name: string, exceptId = '') =>
      (await db.get('SELECT 1 AS x FROM machines WHERE org_id = ? AND name = ? AND id != ? AND deleted_at IS NULL', [orgId, name, exceptId])) !== undefined,
    page: (orgId: string, after: Keyset, limit: number, state: MachineState | null) =>
      db.all<MachineRow>(
        `SELECT * FROM machines WHERE org_id = @org AND deleted_at IS NULL AND (@state IS NULL OR state = @state)
         AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`,
        { org: orgId, ca: after.created_at, cid: after.id, limit, state },
      ),
    inStates: (states: readonly MachineState[]) =>
      db.all<MachineRow>(`SELECT * FROM machines WHERE deleted_at IS NULL AND state IN (${states.map((s) => `'${s}'`).join(',')})`),
    countLive: async (orgId: string) => (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM machines WHERE org_id = ? AND deleted_at IS NULL', [orgId]))!.n,
    /** Machines holding compute on this host (every organization), per size: what admission control counts. */
    computeBySize: () =>
      db.all<{ size: MachineSize; n: number }>(`SELECT size, COUNT(*) AS n FROM machines WHERE deleted_at IS NULL AND state IN (${inList}) GROUP BY size`),
    countRunning: async (orgId: string) =>
      (await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM machines WHERE org_id = ? AND deleted_at IS NULL AND state = 'running'", [orgId]))!.n,
    /** Live machines per state (the metrics gauge). */
    countByState: () => db.all<{ state: MachineState; n: number }>('SELECT state, COUNT(*) AS n FROM machines WHERE deleted_at IS NULL GROUP BY state'),
    countCompute: async (orgId: string) =>
      (await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM machines WHERE org_id = ? AND deleted_at IS NULL AND state IN (${inList})`, [orgId]))!.n,
    /** Compare-and-set: moves the row only if its state is still `from`. */
    casState(id: string, from: MachineState, to: MachineState, at: string): Promise<boolean> {
      return db.tx(async () => {
        const ok = (await db.run('UPDATE machines SET state = ?, state_changed_at = ?, updated_at = ? WHERE id = ? AND state = ? AND deleted_at IS NULL', [
          to, at, at, id, from,
        ])).changes === 1;
        if (ok) await moved(id, from, to, at);
        return ok;
      });
    },
    markDeleted(id: string, at: string): Promise<boolean> {
      return db.tx(async () => {
        const ok = (await db.run("UPDATE machines SET deleted_at = ?, updated_at = ? WHERE id = ? AND state = 'deleting' AND deleted_at IS NULL", [at, at, id]))
          .changes === 1;
        if (ok) await moved(id, 'deleting', null, at);
        return ok;
      });
    },
    /** Used only to undo an insert whose substrate create failed before anything existed. */
    removeRow(id: string): Promise<void> {
      return db.tx(async () => {
        await db.run('DELETE FROM machine_events WHERE machine_id = ?', [id]);
        await db.run('DELETE FROM machines WHERE id = ?', [id]);
      });
    },
    async update(id: string, fields: { name: string; metadata: string }, at: string): Promise<void> {
      await db.run('UPDATE machines SET name = ?, metadata = ?, updated_at = ? WHERE id = ?', [fields.name, fields.metadata, at, id]);
    },
  };
}

export function sessionsRepo(db: Db) {
  return {
    async insert(s: SessionRow): Promise<void> {
      await db.run(
        `INSERT INTO sessions (id,org_id,machine_id,type,state,opener_kind,opener_id,created_at,closed_at)
         VALUES (@id,@org_id,@machine_id,@type,@state,@opener_kind,@opener_id,@created_at,@closed_at)`,
        { ...s },
      );
    },
    inOrg: (orgId: string, id: string) => db.get<SessionRow>('SELECT * FROM sessions WHERE org_id = ? AND id = ?', [orgId, id]),
    byId: (id: string) => db.get<SessionRow>('SELECT * FROM sessions WHERE id = ?', [id]),
    page: (orgId: string, after: Keyset, limit: number, f: { machine_id: string | null; state: SessionState | null }) =>
      db.all<SessionRow>(
        `SELECT * FROM sessions WHERE org_id = @org AND (@mid IS NULL OR machine_id = @mid) AND (@state IS NULL OR state = @state)
         AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`,
        { org: orgId, ca: after.created_at, cid: after.id, limit, mid: f.machine_id, state: f.state },
      ),
    countOpen: async (orgId: string) => (await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM sessions WHERE org_id = ? AND state != 'closed'", [orgId]))!.n,
    openOnMachine: (machineId: string) => db.all<SessionRow>("SELECT * FROM sessions WHERE machine_id = ? AND state != 'closed'", [machineId]),
    async close(id: string, at: string): Promise<boolean> {
      return (await db.run("UPDATE sessions SET state = 'closed', closed_at = ? WHERE id = ? AND state != 'closed'", [at, id])).changes === 1;
    },
    async setState(id: string, from: SessionState, to: SessionState): Promise<boolean> {
      return (await db.run('UPDATE sessions SET state = ? WHERE id = ? AND state = ?', [to, id, from])).changes === 1;
    },
    touch: (id: string, at: string) => db.run("UPDATE sessions SET last_active_at = ? WHERE id = ? AND state != 'closed'", [at, id]),
    /** Every `active` session counts as in use at `at` (start-up: no socket survived the restart). */
    async touchActive(at: string): Promise<void> {
      await db.run("UPDATE sessions SET last_active_at = ? WHERE state = 'active'", [at]);
    },
    /** Open sessions with when they were last in use, and whether they hold a live input lease now. */
    openWithActivity: (nowMs: number) =>
      db.all<SessionRow & { last_active: string; leased: number }>(
        `SELECT s.*, COALESCE(s.last_active_at, s.created_at) AS last_active,
           EXISTS (SELECT 1 FROM input_leases l WHERE l.session_id = s.id AND l.expires_at > ?) AS leased
         FROM sessions s WHERE s.state != 'closed'`,
        [nowMs],
      ),
  };
}

export function leasesRepo(db: Db) {
  return {
    get: async (machineId: string) =>
      (await db.get<LeaseRow>('SELECT machine_id, session_id, fence, expires_at FROM input_leases WHERE machine_id = ?', [machineId])) ?? null,
    /**
     * Compare-and-set on the fence that was read (`null`: no row existed). A renewal keeps the fence, so
     * it also matches on the holder.
     */
    async put(machineId: string, read: LeaseRow | null, next: { session_id: string | null; fence: number; expires_at: number }, at: string): Promise<boolean> {
      if (!read) {
        return (
          (await db.run('INSERT OR IGNORE INTO input_leases (machine_id, session_id, fence, expires_at, updated_at) VALUES (?,?,?,?,?)', [
            machineId, next.session_id, next.fence, next.expires_at, at,
          ])).changes === 1
        );
      }
      return (
        (await db.run(
          'UPDATE input_leases SET session_id = ?, fence = ?, expires_at = ?, updated_at = ? WHERE machine_id = ? AND fence = ? AND session_id IS ?',
          [next.session_id, next.fence, next.expires_at, at, machineId, read.fence, read.session_id],
        )).changes === 1
      );
    },
  };
}

export function eventsRepo(db: Db) {
  return {
    async insert(e: Omit<EventRow, 'seq'>): Promise<number> {
      const r = await db.run('INSERT INTO machine_events (id,org_id,machine_id,type,data,created_at) VALUES (@id,@org_id,@machine_id,@type,@data,@created_at)', {
        ...e,
      });
      return r.insertId;
    },
    /** Newest first: rows with seq below `before` (null: from the newest). */
    pageDesc: (machineId: string, before: number | null, limit: number) =>
      db.all<EventRow>('SELECT * FROM machine_events WHERE machine_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?', [
        machineId, before ?? Number.MAX_SAFE_INTEGER, limit,
      ]),
    /** Oldest first: rows after `after` (for live subscribers catching up). */
    after: (machineId: string, after: number, limit: number) =>
      db.all<EventRow>('SELECT * FROM machine_events WHERE machine_id = ? AND seq > ? ORDER BY seq ASC LIMIT ?', [machineId, after, limit]),
    lastSeq: async (machineId: string) =>
      (await db.get<{ s: number | null }>('SELECT MAX(seq) AS s FROM machine_events WHERE machine_id = ?', [machineId]))!.s ?? 0,
  };
}

/** Machines a disk-volume recovery stopped and owes a start (migration 9). */
export function volumeRestartsRepo(db: Db) {
  return {
    add: (machineId: string) => db.run('INSERT OR IGNORE INTO volume_restarts (machine_id, stopped_at) VALUES (?, NULL)', [machineId]),
    stopped: (machineId: string, at: string) => db.run('UPDATE volume_restarts SET stopped_at = ? WHERE machine_id = ?', [at, machineId]),
    all: () => db.all<{ machine_id: string; stopped_at: string | null }>('SELECT machine_id, stopped_at FROM volume_restarts ORDER BY machine_id'),
    /** Whether any start is owed (the substrate watch asks every pass). */
    any: async () => (await db.get('SELECT 1 FROM volume_restarts LIMIT 1')) !== undefined,
    forget: (machineId: string) => db.run('DELETE FROM volume_restarts WHERE machine_id = ?', [machineId]),
  };
}

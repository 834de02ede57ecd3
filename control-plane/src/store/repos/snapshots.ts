/**
 * Snapshots and templates. State moves are compare-and-set on the state that was read. A deleted snapshot
 * or template row is removed once its layer pin is released; `layer_id` never leaves the control plane.
 */
import type { MachineSize } from '../../../../shared/schemas/machine.js';
import type { SnapshotOrigin, SnapshotState } from '../../../../shared/schemas/snapshot.js';
import type { TemplateSource, TemplateState } from '../../../../shared/schemas/template.js';
import { COUNTED_SNAPSHOT_STATES, COUNTED_TEMPLATE_STATES } from '../../domain/snapshot-lifecycle.js';
import type { Db } from '../db.js';
import { afterSql, type Keyset } from '../pagination.js';

export interface SnapshotRow {
  id: string;
  org_id: string;
  machine_id: string;
  name: string;
  state: SnapshotState;
  origin: SnapshotOrigin;
  layer_id: string | null;
  size_bytes: number | null;
  created_at: string;
  completed_at: string | null;
}

export interface TemplateRow {
  id: string;
  org_id: string;
  name: string;
  state: TemplateState;
  source: TemplateSource;
  size: MachineSize;
  snapshot_id: string | null;
  machine_id: string | null;
  layer_id: string | null;
  size_bytes: number | null;
  created_at: string;
  completed_at: string | null;
}

const inList = (xs: readonly string[]) => xs.map((s) => `'${s}'`).join(',');

/**
 * Called inside the transaction that removes a snapshot or template row, before the row goes: metering closes
 * its last stored interval atomically with the removal (between two flushes it would otherwise be lost).
 */
export type RemoveHook = (kind: 'snapshot' | 'template', id: string) => Promise<void>;

/** A row's removal with the remove hooks run first, in the same transaction; false when no such row qualifies. */
function removal(db: Db, table: 'snapshots' | 'templates', condition: string, beforeDelete: (id: string) => Promise<void>): (id: string) => Promise<boolean> {
  return (id) =>
    db.tx(async () => {
      if ((await db.get(`SELECT 1 FROM ${table} WHERE id = ? ${condition}`, [id])) === undefined) return false;
      await beforeDelete(id);
      return (await db.run(`DELETE FROM ${table} WHERE id = ? ${condition}`, [id])).changes === 1;
    });
}

export function snapshotsRepo(db: Db) {
  const hooks: RemoveHook[] = [];
  return {
    onRemove(h: RemoveHook): void {
      hooks.push(h);
    },
    async insert(s: SnapshotRow): Promise<void> {
      await db.run(
        `INSERT INTO snapshots (id,org_id,machine_id,name,state,origin,layer_id,size_bytes,created_at,completed_at)
         VALUES (@id,@org_id,@machine_id,@name,@state,@origin,@layer_id,@size_bytes,@created_at,@completed_at)`,
        { ...s },
      );
    },
    inOrg: (orgId: string, id: string) => db.get<SnapshotRow>('SELECT * FROM snapshots WHERE org_id = ? AND id = ?', [orgId, id]),
    byId: (id: string) => db.get<SnapshotRow>('SELECT * FROM snapshots WHERE id = ?', [id]),
    page: (orgId: string, after: Keyset, limit: number, f: { machine_id: string | null; origin: SnapshotOrigin | null }) =>
      db.all<SnapshotRow>(
        `SELECT * FROM snapshots WHERE org_id = @org AND (@mid IS NULL OR machine_id = @mid) AND (@origin IS NULL OR origin = @origin)
         AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`,
        { org: orgId, ca: after.created_at, cid: after.id, limit, mid: f.machine_id, origin: f.origin },
      ),
    /** A machine's snapshots, newest first (its chain, for newest-only deletion). */
    chain: (machineId: string) =>
      db.all<SnapshotRow>('SELECT * FROM snapshots WHERE machine_id = ? ORDER BY created_at DESC, rowid DESC', [machineId]),
    countForMachine: async (machineId: string) =>
      (await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM snapshots WHERE machine_id = ? AND state IN (${inList(COUNTED_SNAPSHOT_STATES)})`, [machineId]))!.n,
    /** The largest per-machine count in an organization (what `GET /v1/billing` shows for snapshots_per_machine). */
    maxPerMachine: async (orgId: string) =>
      (await db.get<{ n: number | null }>(
        `SELECT MAX(n) AS n FROM (SELECT COUNT(*) AS n FROM snapshots WHERE org_id = ? AND state IN (${inList(COUNTED_SNAPSHOT_STATES)}) GROUP BY machine_id)`,
        [orgId],
      ))!.n ?? 0,
    /** Bytes of the distinct layers held by ready snapshots and templates (as captured). */
    layerBytes: async () =>
      (await db.get<{ b: number | null }>(
        `SELECT SUM(b) AS b FROM (SELECT layer_id, MAX(size_bytes) AS b FROM (
           SELECT layer_id, size_bytes FROM snapshots WHERE state = 'ready' AND layer_id IS NOT NULL
           UNION ALL SELECT layer_id, size_bytes FROM templates WHERE state = 'ready' AND layer_id IS NOT NULL
         ) GROUP BY layer_id)`,
      ))?.b ?? 0,
    inStates: (states: readonly SnapshotState[]) => db.all<SnapshotRow>(`SELECT * FROM snapshots WHERE state IN (${inList(states)})`),
    /** Compare-and-set on the state that was read. */
    async casState(id: string, from: SnapshotState, to: SnapshotState): Promise<boolean> {
      return (await db.run('UPDATE snapshots SET state = ? WHERE id = ? AND state = ?', [to, id, from])).changes === 1;
    },
    /** pending → ready with the layer that holds the capture. */
    async settleReady(id: string, layerId: string, bytes: number, at: string): Promise<boolean> {
      return (
        (await db.run("UPDATE snapshots SET state = 'ready', layer_id = ?, size_bytes = ?, completed_at = ? WHERE id = ? AND state = 'pending'", [
          layerId, bytes, at, id,
        ])).changes === 1
      );
    },
    async settleError(id: string, at: string): Promise<boolean> {
      return (await db.run("UPDATE snapshots SET state = 'error', completed_at = ? WHERE id = ? AND state = 'pending'", [at, id])).changes === 1;
    },
    /** Only once deleting (its pin released). */
    remove: removal(db, 'snapshots', "AND state = 'deleting'", async (id) => {
      for (const h of hooks) await h('snapshot', id);
    }),
  };
}

export function templatesRepo(db: Db) {
  const hooks: RemoveHook[] = [];
  return {
    onRemove(h: RemoveHook): void {
      hooks.push(h);
    },
    async insert(t: TemplateRow): Promise<void> {
      await db.run(
        `INSERT INTO templates (id,org_id,name,state,source,size,snapshot_id,machine_id,layer_id,size_bytes,created_at,completed_at)
         VALUES (@id,@org_id,@name,@state,@source,@size,@snapshot_id,@machine_id,@layer_id,@size_bytes,@created_at,@completed_at)`,
        { ...t },
      );
    },
    inOrg: (orgId: string, id: string) => db.get<TemplateRow>('SELECT * FROM templates WHERE org_id = ? AND id = ?', [orgId, id]),
    byId: (id: string) => db.get<TemplateRow>('SELECT * FROM templates WHERE id = ?', [id]),
    all: () => db.all<TemplateRow>('SELECT * FROM templates'),
    page: (orgId: string, after: Keyset, limit: number) =>
      db.all<TemplateRow>(`SELECT * FROM templates WHERE org_id = @org AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`, {
        org: orgId, ca: after.created_at, cid: after.id, limit,
      }),
    count: async (orgId: string) =>
      (await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM templates WHERE org_id = ? AND state IN (${inList(COUNTED_TEMPLATE_STATES)})`, [orgId]))!.n,
    inStates: (states: readonly TemplateState[]) => db.all<TemplateRow>(`SELECT * FROM templates WHERE state IN (${inList(states)})`),
    async settleReady(id: string, f: { snapshot_id: string | null; layer_id: string | null; size_bytes: number | null }, at: string): Promise<boolean> {
      return (
        (await db.run("UPDATE templates SET state = 'ready', snapshot_id = ?, layer_id = ?, size_bytes = ?, completed_at = ? WHERE id = ? AND state = 'building'", [
          f.snapshot_id, f.layer_id, f.size_bytes, at, id,
        ])).changes === 1
      );
    },
    async settleError(id: string, at: string): Promise<boolean> {
      return (await db.run("UPDATE templates SET state = 'error', completed_at = ? WHERE id = ? AND state = 'building'", [at, id])).changes === 1;
    },
    remove: removal(db, 'templates', '', async (id) => {
      for (const h of hooks) await h('template', id);
    }),
  };
}

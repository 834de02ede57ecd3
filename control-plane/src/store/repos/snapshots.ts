/**
 * Snapshots and templates. State moves are compare-and-set on the state that was read. A deleted snapshot
 * or template row is removed once its layer pin is released; `layer_id` never leaves the control plane.
 */
import { sql } from 'kysely';
import type { MachineSize } from '../../../../shared/schemas/machine.js';
import type { SnapshotOrigin, SnapshotState } from '../../../../shared/schemas/snapshot.js';
import type { TemplateSource, TemplateState } from '../../../../shared/schemas/template.js';
import { COUNTED_SNAPSHOT_STATES, COUNTED_TEMPLATE_STATES } from '../../domain/snapshot-lifecycle.js';
import type { Db } from '../db.js';
import type { Keyset } from '../pagination.js';
import { dialect } from './dialect.js';
import { one } from './results.js';

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
  /** The host whose layer store holds the layer (null: the deployment's only host). */
  host_id: string | null;
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
  /** The host whose layer store the template's pin was first taken on (null: the deployment's only host). */
  host_id: string | null;
}

/**
 * Called inside the transaction that removes a snapshot or template row, before the row goes: metering closes
 * its last stored interval atomically with the removal (between two flushes it would otherwise be lost). Hooks run
 * one after another, each awaited, in the order they were registered.
 */
export type RemoveHook = (kind: 'snapshot' | 'template', id: string) => Promise<void>;

/**
 * A row's removal with the remove hooks run first, in the same transaction; false when no such row qualifies.
 * `lock` reads the row if it qualifies, locking it on PostgreSQL, so of two racing removals the second waits and
 * then finds nothing: the hooks run once.
 */
function removal(db: Db, lock: (id: string) => Promise<unknown>, remove: (id: string) => Promise<boolean>, hooks: RemoveHook[], kind: 'snapshot' | 'template') {
  return (id: string): Promise<boolean> =>
    db.tx(async () => {
      if ((await lock(id)) === undefined) return false;
      for (const h of hooks) await h(kind, id);
      return remove(id);
    });
}

/** Ready snapshots and templates, over distinct layers: what the layer store holds (as captured). */
function layerBytes(db: Db): Promise<number> {
  const q = db.q();
  const held = q.selectFrom('snapshots').select(['layer_id', 'size_bytes']).where('state', '=', 'ready').where('layer_id', 'is not', null)
    .unionAll(q.selectFrom('templates').select(['layer_id', 'size_bytes']).where('state', '=', 'ready').where('layer_id', 'is not', null));
  const perLayer = q.selectFrom(held.as('h')).select((eb) => ['h.layer_id', eb.fn.max('h.size_bytes').as('b')]).groupBy('h.layer_id');
  return q.selectFrom(perLayer.as('l')).select((eb) => eb.fn.sum<number | null>('l.b').as('b')).executeTakeFirstOrThrow().then((r) => r.b ?? 0);
}

export function snapshotsRepo(db: Db) {
  const d = dialect(db.engine);
  const hooks: RemoveHook[] = [];
  const counted = () =>
    db.q().selectFrom('snapshots').select((eb) => eb.fn.countAll<number>().as('n')).where('state', 'in', COUNTED_SNAPSHOT_STATES);
  return {
    onRemove(h: RemoveHook): void {
      hooks.push(h);
    },
    async insert(s: SnapshotRow): Promise<void> {
      await db.q().insertInto('snapshots').values(s).execute();
    },
    inOrg: (orgId: string, id: string): Promise<SnapshotRow | undefined> =>
      db.q().selectFrom('snapshots').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst(),
    byId: (id: string): Promise<SnapshotRow | undefined> => db.q().selectFrom('snapshots').selectAll().where('id', '=', id).executeTakeFirst(),
    page: (orgId: string, after: Keyset, limit: number, f: { machine_id: string | null; origin: SnapshotOrigin | null }): Promise<SnapshotRow[]> =>
      db.q().selectFrom('snapshots').selectAll()
        .where((eb) =>
          eb.and([
            eb('org_id', '=', orgId),
            ...(f.machine_id === null ? [] : [eb('machine_id', '=', f.machine_id)]),
            ...(f.origin === null ? [] : [eb('origin', '=', f.origin)]),
            d.after(eb, after),
          ]),
        )
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    /**
     * A machine's snapshots, newest first (its chain, for newest-only deletion). Two of one instant: the later
     * inserted first on SQLite, by id on PostgreSQL (dialect.ts).
     */
    chain: (machineId: string): Promise<SnapshotRow[]> =>
      db.q().selectFrom('snapshots').selectAll().where('machine_id', '=', machineId)
        .orderBy('created_at', d.desc).orderBy(sql.ref(d.insertionKey), d.desc).execute(),
    countForMachine: async (machineId: string): Promise<number> => (await counted().where('machine_id', '=', machineId).executeTakeFirstOrThrow()).n,
    /** The largest per-machine count in an organization (what `GET /v1/billing` shows for snapshots_per_machine). */
    maxPerMachine: async (orgId: string): Promise<number> =>
      (await db.q().selectFrom(counted().where('org_id', '=', orgId).groupBy('machine_id').as('per'))
        .select((eb) => eb.fn.max('per.n').as('n')).executeTakeFirstOrThrow()).n ?? 0,
    /** Snapshots in any of `states`, oldest first. */
    inStates: async (states: readonly SnapshotState[]): Promise<SnapshotRow[]> =>
      states.length === 0
        ? []
        : db.q().selectFrom('snapshots').selectAll().where('state', 'in', states).orderBy('created_at', d.asc).orderBy('id', d.asc).execute(),
    /** Compare-and-set on the state that was read. */
    async casState(id: string, from: SnapshotState, to: SnapshotState): Promise<boolean> {
      return one(await db.q().updateTable('snapshots').set({ state: to }).where('id', '=', id).where('state', '=', from).executeTakeFirst());
    },
    /** pending → ready with the layer that holds the capture. */
    async settleReady(id: string, layerId: string, bytes: number, at: string): Promise<boolean> {
      return one(
        await db.q().updateTable('snapshots').set({ state: 'ready', layer_id: layerId, size_bytes: bytes, completed_at: at })
          .where('id', '=', id).where('state', '=', 'pending').executeTakeFirst(),
      );
    },
    async settleError(id: string, at: string): Promise<boolean> {
      return one(await db.q().updateTable('snapshots').set({ state: 'error', completed_at: at }).where('id', '=', id).where('state', '=', 'pending').executeTakeFirst());
    },
    /** Only once deleting (its pin released). */
    remove: removal(
      db,
      (id) => db.q().selectFrom('snapshots').select('id').where('id', '=', id).where('state', '=', 'deleting').$if(d.rowLocks, (q) => q.forUpdate()).executeTakeFirst(),
      async (id) => one(await db.q().deleteFrom('snapshots').where('id', '=', id).where('state', '=', 'deleting').executeTakeFirst()),
      hooks,
      'snapshot',
    ),
    /** Bytes of the distinct layers held by ready snapshots and templates (the largest size recorded per layer). */
    layerBytes: (): Promise<number> => layerBytes(db),
  };
}

export function templatesRepo(db: Db) {
  const d = dialect(db.engine);
  const hooks: RemoveHook[] = [];
  return {
    onRemove(h: RemoveHook): void {
      hooks.push(h);
    },
    async insert(t: TemplateRow): Promise<void> {
      await db.q().insertInto('templates').values(t).execute();
    },
    inOrg: (orgId: string, id: string): Promise<TemplateRow | undefined> =>
      db.q().selectFrom('templates').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst(),
    byId: (id: string): Promise<TemplateRow | undefined> => db.q().selectFrom('templates').selectAll().where('id', '=', id).executeTakeFirst(),
    /** Every template, oldest first. */
    all: (): Promise<TemplateRow[]> => db.q().selectFrom('templates').selectAll().orderBy('created_at', d.asc).orderBy('id', d.asc).execute(),
    page: (orgId: string, after: Keyset, limit: number): Promise<TemplateRow[]> =>
      db.q().selectFrom('templates').selectAll().where('org_id', '=', orgId).where((eb) => d.after(eb, after))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    count: async (orgId: string): Promise<number> =>
      (await db.q().selectFrom('templates').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId)
        .where('state', 'in', COUNTED_TEMPLATE_STATES).executeTakeFirstOrThrow()).n,
    /** Templates in any of `states`, oldest first. */
    inStates: async (states: readonly TemplateState[]): Promise<TemplateRow[]> =>
      states.length === 0
        ? []
        : db.q().selectFrom('templates').selectAll().where('state', 'in', states).orderBy('created_at', d.asc).orderBy('id', d.asc).execute(),
    async settleReady(id: string, f: { snapshot_id: string | null; layer_id: string | null; size_bytes: number | null }, at: string): Promise<boolean> {
      return one(
        await db.q().updateTable('templates')
          .set({ state: 'ready', snapshot_id: f.snapshot_id, layer_id: f.layer_id, size_bytes: f.size_bytes, completed_at: at })
          .where('id', '=', id).where('state', '=', 'building').executeTakeFirst(),
      );
    },
    async settleError(id: string, at: string): Promise<boolean> {
      return one(await db.q().updateTable('templates').set({ state: 'error', completed_at: at }).where('id', '=', id).where('state', '=', 'building').executeTakeFirst());
    },
    remove: removal(
      db,
      (id) => db.q().selectFrom('templates').select('id').where('id', '=', id).$if(d.rowLocks, (q) => q.forUpdate()).executeTakeFirst(),
      async (id) => one(await db.q().deleteFrom('templates').where('id', '=', id).executeTakeFirst()),
      hooks,
      'template',
    ),
  };
}

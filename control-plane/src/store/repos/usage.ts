/**
 * Usage records (hourly, grown in place), meter cursors and closed-period summaries. Quantities are read
 * as decimal text: byte-seconds outgrow a double's exact range.
 */
import { sql, type NotNull } from 'kysely';
import { newId } from '../../../../shared/ids.js';
import type { MachineSize } from '../../../../shared/schemas/machine.js';
import type { Meter } from '../../../../shared/schemas/usage.js';
import type { Db } from '../db.js';
import { dialect } from './dialect.js';
import { changes, type Changes } from './results.js';

export interface UsageRecordRow {
  id: string;
  org_id: string;
  source_id: string;
  machine_id: string | null;
  template_id: string | null;
  meter: Meter;
  /** '' when the meter has no size. */
  size: MachineSize | '';
  /** ISO instant of the UTC hour's start. */
  hour: string;
  /** Decimal text. */
  quantity: string;
  updated_at: string;
}

export type CursorKind = 'machine' | 'snapshot' | 'template';

/** A stored snapshot or template that accrues cold storage: ready ones, and snapshots still being deleted. */
export interface ColdSubject {
  kind: 'snapshot' | 'template';
  id: string;
  org_id: string;
  machine_id: string | null;
  size_bytes: number;
  since: string;
}

export function usageRepo(db: Db) {
  const d = dialect(db.engine);
  /** What holds cold storage: ready (or deleting) snapshots and ready templates with a captured size. */
  const cold = () => {
    const q = db.q();
    return q.selectFrom('snapshots')
      .select((eb) => [
        sql.lit<'snapshot' | 'template'>('snapshot').as('kind'), 'id', 'org_id', sql.ref<string | null>('machine_id').as('machine_id'), 'size_bytes', eb.fn.coalesce('completed_at', 'created_at').as('since'),
      ])
      .where('state', 'in', ['ready', 'deleting']).where('size_bytes', 'is not', null)
      .unionAll(
        q.selectFrom('templates')
          .select((eb) => [
            sql.lit<'snapshot' | 'template'>('template').as('kind'), 'id', 'org_id', sql.lit<string | null>(null).as('machine_id'), 'size_bytes',
            eb.fn.coalesce('completed_at', 'created_at').as('since'),
          ])
          .where('state', '=', 'ready').where('size_bytes', 'is not', null),
      )
      .as('c');
  };
  const subjects = () =>
    db.q().selectFrom(cold()).select(['c.kind', 'c.id', 'c.org_id', 'c.machine_id', 'c.size_bytes', 'c.since']).$narrowType<{ size_bytes: NotNull }>();
  async function advanceCursor(sourceId: string, kind: CursorKind, from: string | null, to: string): Promise<boolean> {
    const moved = from === null
      ? await db.q().insertInto('meter_cursors').values({ source_id: sourceId, kind, metered_until: to })
        .onConflict((oc) => oc.column('source_id').doNothing()).returning('source_id').executeTakeFirst()
      : await db.q().updateTable('meter_cursors').set({ metered_until: to })
        .where('source_id', '=', sourceId).where('metered_until', '=', from).returning('source_id').executeTakeFirst();
    return moved !== undefined;
  }
  return {
    /** Adds `quantity` to the subject's record for that meter and hour (creating it). */
    async add(r: { org_id: string; source_id: string; machine_id: string | null; template_id: string | null; meter: Meter; size: MachineSize | null; hour: string; quantity: bigint }, at: string): Promise<void> {
      await db.q().insertInto('usage_records')
        .values({ ...r, id: newId('usage'), size: r.size ?? '', updated_at: at })
        .onConflict((oc) =>
          oc.columns(['org_id', 'source_id', 'meter', 'size', 'hour'])
            .doUpdateSet((eb) => ({ quantity: eb('usage_records.quantity', '+', eb.ref('excluded.quantity')), updated_at: eb.ref('excluded.updated_at') })),
        )
        .execute();
    },
    cursor: async (sourceId: string): Promise<string | null> =>
      (await db.q().selectFrom('meter_cursors').select('metered_until').where('source_id', '=', sourceId).executeTakeFirst())?.metered_until ?? null,
    async setCursor(sourceId: string, kind: CursorKind, at: string): Promise<void> {
      await db.q().insertInto('meter_cursors').values({ source_id: sourceId, kind, metered_until: at })
        .onConflict((oc) => oc.column('source_id').doUpdateSet((eb) => ({ metered_until: eb.ref('excluded.metered_until') })))
        .execute();
    },
    /**
     * Compare-and-set: moves the subject's cursor from `from` (null: it has none yet) to `to`, only if it is still
     * at `from`. True when this call moved it: the interval [from, to] is then this caller's alone to record. A
     * conditional `UPDATE … RETURNING` / `INSERT … ON CONFLICT DO NOTHING RETURNING` is a CAS on both engines (on
     * PostgreSQL a concurrent mover's uncommitted advance blocks this one, which then sees the cursor moved).
     */
    advanceCursor,
    /**
     * The cursor as it stood, and whether this call moved it to `to`: inserted when there was none, or advanced when
     * it was still where it stood and before `to` — the read and `advanceCursor`'s compare-and-set in one. On
     * PostgreSQL one statement (the read a CTE the upsert's condition compares with: a concurrent mover's advance,
     * waited for, leaves the row unequal and `moved` false, as a lost CAS); on SQLite, whose writers are serialized
     * and whose round trips cost nothing, the read then the CAS.
     */
    async claimCursor(sourceId: string, kind: CursorKind, to: string): Promise<{ prev: string | null; moved: boolean }> {
      if (d.engine === 'sqlite') {
        const prev = (await db.q().selectFrom('meter_cursors').select('metered_until').where('source_id', '=', sourceId).executeTakeFirst())?.metered_until ?? null;
        return { prev, moved: (prev === null || prev < to) && (await advanceCursor(sourceId, kind, prev, to)) };
      }
      const r = await sql<{ prev: string | null; moved: boolean }>`WITH prev AS (SELECT metered_until FROM meter_cursors WHERE source_id = ${sourceId}),
        up AS (INSERT INTO meter_cursors (source_id, kind, metered_until) VALUES (${sourceId}, ${kind}, ${to})
          ON CONFLICT (source_id) DO UPDATE SET metered_until = excluded.metered_until
          WHERE meter_cursors.metered_until = (SELECT metered_until FROM prev) AND ${d.bytes('meter_cursors.metered_until')} < excluded.metered_until
          RETURNING 1)
        SELECT (SELECT metered_until FROM prev) AS prev, EXISTS (SELECT 1 FROM up) AS moved`.execute(db.q());
      return r.rows[0]!;
    },
    /** Moves every cursor to `at` without recording anything (start-up: time the server was down is not metered). */
    async resumeAll(at: string): Promise<void> {
      await db.q().updateTable('meter_cursors').set({ metered_until: at }).where((eb) => eb(d.bytes('metered_until'), '<', at)).execute();
    },
    dropCursor: async (sourceId: string): Promise<Changes> =>
      changes(await db.q().deleteFrom('meter_cursors').where('source_id', '=', sourceId).executeTakeFirst()),
    /** Cursors of snapshots and templates that are no longer stored (their rows are removed on delete). */
    orphanCursors: (): Promise<Array<{ source_id: string }>> =>
      db.q().selectFrom('meter_cursors as c').select('c.source_id')
        .where((eb) =>
          eb.or([
            eb.and([eb('c.kind', '=', 'snapshot'), eb.not(eb.exists(eb.selectFrom('snapshots as s').select('s.id').whereRef('s.id', '=', 'c.source_id')))]),
            eb.and([eb('c.kind', '=', 'template'), eb.not(eb.exists(eb.selectFrom('templates as t').select('t.id').whereRef('t.id', '=', 'c.source_id')))]),
          ]),
        )
        .orderBy('c.source_id', d.asc).execute(),
    /** Records whose hour overlaps [start, end), ordered by (hour, id) for keyset paging. */
    page: (orgId: string, f: { start: string; end: string; meter: Meter | null }, after: { hour: string; id: string }, limit: number): Promise<UsageRecordRow[]> =>
      db.q().selectFrom('usage_records')
        .select((eb) => ['id', 'org_id', 'source_id', 'machine_id', 'template_id', 'meter', 'size', 'hour', eb.cast<string>('quantity', 'text').as('quantity'), 'updated_at'])
        .where((eb) =>
          eb.and([
            eb('org_id', '=', orgId),
            eb(d.bytes('hour'), '>=', f.start),
            eb(d.bytes('hour'), '<', f.end),
            ...(f.meter === null ? [] : [eb('meter', '=', f.meter)]),
            eb.or([eb(d.bytes('hour'), '>', after.hour), eb.and([eb('hour', '=', after.hour), eb(d.bytes('id'), '>', after.id)])]),
          ]),
        )
        .orderBy('hour', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    /**
     * Sums per (meter, UTC day) over hours in [first, end). Summed per day so a sum stays inside SQLite's
     * 64-bit integers whatever the fleet; callers add days up as bigint.
     */
    daily: (orgId: string, first: string, end: string): Promise<Array<{ meter: Meter; day: string; q: string }>> =>
      db.q().selectFrom('usage_records')
        .select((eb) => ['meter', eb.fn<string>('substr', ['hour', eb.lit(1), eb.lit(10)]).as('day'), eb.cast<string>(eb.fn.sum('quantity'), 'text').as('q')])
        .where('org_id', '=', orgId).where((eb) => eb.and([eb(d.bytes('hour'), '>=', first), eb(d.bytes('hour'), '<', end)]))
        .groupBy((eb) => ['meter', eb.fn<string>('substr', ['hour', eb.lit(1), eb.lit(10)])])
        .orderBy((eb) => eb.fn<string>('substr', ['hour', eb.lit(1), eb.lit(10)]), d.asc).orderBy('meter', d.asc).execute(),
    hourly: (orgId: string, first: string, end: string, meter: Meter | null): Promise<Array<{ meter: Meter; hour: string; q: string }>> =>
      db.q().selectFrom('usage_records')
        .select((eb) => ['meter', 'hour', eb.cast<string>(eb.fn.sum('quantity'), 'text').as('q')])
        .where((eb) => eb.and([eb('org_id', '=', orgId), eb(d.bytes('hour'), '>=', first), eb(d.bytes('hour'), '<', end), ...(meter === null ? [] : [eb('meter', '=', meter)])]))
        .groupBy(['meter', 'hour']).orderBy('hour', d.asc).orderBy('meter', d.asc).execute(),
    /** What holds cold storage: ready (or deleting) snapshots and ready templates with a captured size; by kind and id. */
    coldSubjects: (): Promise<ColdSubject[]> => subjects().orderBy('c.kind', d.asc).orderBy('c.id', d.asc).execute(),
    /** One stored snapshot or template, if it accrues cold storage now. */
    coldSubject: (kind: 'snapshot' | 'template', id: string): Promise<ColdSubject | undefined> =>
      subjects().where('c.kind', '=', kind).where('c.id', '=', id).executeTakeFirst(),
    finalSummary: async (orgId: string, periodStart: string): Promise<string | null> =>
      (await db.q().selectFrom('usage_summaries').select('body').where('org_id', '=', orgId).where('period_start', '=', periodStart).executeTakeFirst())
        ?.body ?? null,
    async insertFinal(orgId: string, periodStart: string, body: string, at: string): Promise<void> {
      await db.q().insertInto('usage_summaries').values({ org_id: orgId, period_start: periodStart, body, created_at: at }).onConflict((oc) => oc.doNothing()).execute();
    },
  };
}

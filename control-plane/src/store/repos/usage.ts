/**
 * Usage records (hourly, grown in place), meter cursors and closed-period summaries. Quantities are read
 * as decimal text: byte-seconds outgrow a double's exact range.
 */
import { newId } from '../../../../shared/ids.js';
import type { MachineSize } from '../../../../shared/schemas/machine.js';
import type { Meter } from '../../../../shared/schemas/usage.js';
import type { Db } from '../db.js';

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

const COLD_SUBJECTS = `SELECT 'snapshot' AS kind, id, org_id, machine_id, size_bytes, COALESCE(completed_at, created_at) AS since FROM snapshots
    WHERE state IN ('ready','deleting') AND size_bytes IS NOT NULL
  UNION ALL
  SELECT 'template' AS kind, id, org_id, NULL AS machine_id, size_bytes, COALESCE(completed_at, created_at) AS since FROM templates
    WHERE state = 'ready' AND size_bytes IS NOT NULL`;

export function usageRepo(db: Db) {
  return {
    /** Adds `quantity` to the subject's record for that meter and hour (creating it). */
    async add(r: { org_id: string; source_id: string; machine_id: string | null; template_id: string | null; meter: Meter; size: MachineSize | null; hour: string; quantity: bigint }, at: string): Promise<void> {
      await db.run(
        `INSERT INTO usage_records (id,org_id,source_id,machine_id,template_id,meter,size,hour,quantity,updated_at)
         VALUES (@id,@org_id,@source_id,@machine_id,@template_id,@meter,@size,@hour,@quantity,@at)
         ON CONFLICT (org_id, source_id, meter, size, hour) DO UPDATE SET quantity = quantity + excluded.quantity, updated_at = excluded.updated_at`,
        { ...r, id: newId('usage'), size: r.size ?? '', at },
      );
    },
    cursor: async (sourceId: string) => (await db.get<{ metered_until: string }>('SELECT metered_until FROM meter_cursors WHERE source_id = ?', [sourceId]))?.metered_until ?? null,
    async setCursor(sourceId: string, kind: CursorKind, at: string): Promise<void> {
      await db.run(
        'INSERT INTO meter_cursors (source_id, kind, metered_until) VALUES (?,?,?) ON CONFLICT (source_id) DO UPDATE SET metered_until = excluded.metered_until',
        [sourceId, kind, at],
      );
    },
    /** Moves every cursor to `at` without recording anything (start-up: time the server was down is not metered). */
    async resumeAll(at: string): Promise<void> {
      await db.run('UPDATE meter_cursors SET metered_until = ? WHERE metered_until < ?', [at, at]);
    },
    dropCursor: (sourceId: string) => db.run('DELETE FROM meter_cursors WHERE source_id = ?', [sourceId]),
    /** Cursors of snapshots and templates that are no longer stored (their rows are removed on delete). */
    orphanCursors: () =>
      db.all<{ source_id: string }>(
        `SELECT source_id FROM meter_cursors c WHERE (kind = 'snapshot' AND NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.id = c.source_id))
           OR (kind = 'template' AND NOT EXISTS (SELECT 1 FROM templates t WHERE t.id = c.source_id))`,
      ),
    /** Records whose hour overlaps [start, end), ordered by (hour, id) for keyset paging. */
    page: (orgId: string, f: { start: string; end: string; meter: Meter | null }, after: { hour: string; id: string }, limit: number) =>
      db.all<UsageRecordRow>(
        `SELECT id, org_id, source_id, machine_id, template_id, meter, size, hour, CAST(quantity AS TEXT) AS quantity, updated_at
         FROM usage_records WHERE org_id = @org AND hour >= @first AND hour < @end AND (@meter IS NULL OR meter = @meter)
         AND (hour > @ah OR (hour = @ah AND id > @aid)) ORDER BY hour, id LIMIT @limit`,
        { org: orgId, first: f.start, end: f.end, meter: f.meter, ah: after.hour, aid: after.id, limit },
      ),
    /**
     * Sums per (meter, UTC day) over hours in [first, end). Summed per day so a sum stays inside SQLite's
     * 64-bit integers whatever the fleet; callers add days up as bigint.
     */
    daily: (orgId: string, first: string, end: string) =>
      db.all<{ meter: Meter; day: string; q: string }>(
        `SELECT meter, substr(hour, 1, 10) AS day, CAST(SUM(quantity) AS TEXT) AS q FROM usage_records
         WHERE org_id = ? AND hour >= ? AND hour < ? GROUP BY meter, day ORDER BY day, meter`,
        [orgId, first, end],
      ),
    hourly: (orgId: string, first: string, end: string, meter: Meter | null) =>
      db.all<{ meter: Meter; hour: string; q: string }>(
        `SELECT meter, hour, CAST(SUM(quantity) AS TEXT) AS q FROM usage_records
         WHERE org_id = ? AND hour >= ? AND hour < ? AND (? IS NULL OR meter = ?) GROUP BY meter, hour ORDER BY hour, meter`,
        [orgId, first, end, meter, meter],
      ),
    /** What holds cold storage: ready (or deleting) snapshots and ready templates with a captured size. */
    coldSubjects: () => db.all<ColdSubject>(COLD_SUBJECTS),
    /** One stored snapshot or template, if it accrues cold storage now. */
    coldSubject: (kind: 'snapshot' | 'template', id: string) =>
      db.get<ColdSubject>(`SELECT * FROM (${COLD_SUBJECTS}) WHERE kind = ? AND id = ?`, [kind, id]),
    finalSummary: async (orgId: string, periodStart: string) =>
      (await db.get<{ body: string }>('SELECT body FROM usage_summaries WHERE org_id = ? AND period_start = ?', [orgId, periodStart]))?.body ?? null,
    async insertFinal(orgId: string, periodStart: string, body: string, at: string): Promise<void> {
      await db.run('INSERT OR IGNORE INTO usage_summaries (org_id, period_start, body, created_at) VALUES (?,?,?,?)', [orgId, periodStart, body, at]);
    },
  };
}

/**
 * The writer's half of the events channel on PostgreSQL (the reader's is cluster/notify.ts): an event insert takes
 * one transaction-scoped advisory lock, so seqs are assigned and committed in the same order deployment-wide, and
 * NOTIFYs the channel, delivered at commit. Kept in the store so the store imports nothing above it.
 */
import { sql, type Insertable, type Kysely } from 'kysely';
import type { Database, MachineEventsTable } from './engine/schema.js';

export const EVENTS_CHANNEL = 'computer_events';
/** pg_advisory_xact_lock key serializing event writers ("computer events"). */
export const EVENTS_WRITE_KEY = 0x63657674;

/**
 * Inserts `events` in the caller's transaction and notifies readers (delivered at its commit). Returns their seqs.
 * `trx` must be a transaction's connection (a Kysely `Transaction`, or the store's `Db.q()` inside `Db.tx`): the
 * advisory lock is held, and the NOTIFY sent, at its commit. The store's eventsRepo records every event through it
 * on PostgreSQL.
 *
 * One statement, one round trip (it was three: the lock, the insert, the notify). The lock is a materialized CTE the
 * insert's rows are joined with, so no row reaches the insert — whose `seq` default draws from the sequence — before
 * the lock is held; the rows go in in the order given; the NOTIFY carries the greatest seq (called once per row with
 * the same payload, which PostgreSQL delivers once per transaction).
 */
export async function publishEvents(trx: Kysely<Database>, events: Array<Insertable<MachineEventsTable>>): Promise<number[]> {
  if (!events.length) return [];
  const rows = sql.join(events.map((e, i) => sql`(${i}::int, ${e.id}, ${e.org_id}, ${e.machine_id}, ${e.type}, ${e.data}, ${e.created_at})`));
  const r = await sql<{ seq: number }>`
    WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(${EVENTS_WRITE_KEY}) AS held),
    inserted AS (
      INSERT INTO machine_events (id, org_id, machine_id, type, data, created_at)
      SELECT v.id, v.org_id, v.machine_id, v.type, v.data, v.created_at
      FROM locked, (VALUES ${rows}) AS v(n, id, org_id, machine_id, type, data, created_at)
      ORDER BY v.n
      RETURNING seq
    )
    SELECT seq, pg_notify(${EVENTS_CHANNEL}, (SELECT max(seq) FROM inserted)::text) AS notified FROM inserted ORDER BY seq`.execute(trx);
  return r.rows.map((row) => Number(row.seq));
}

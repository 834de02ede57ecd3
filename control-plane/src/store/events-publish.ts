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
 */
export async function publishEvents(trx: Kysely<Database>, events: Array<Insertable<MachineEventsTable>>): Promise<number[]> {
  if (!events.length) return [];
  await sql`SELECT pg_advisory_xact_lock(${EVENTS_WRITE_KEY})`.execute(trx);
  const rows = await trx.insertInto('machine_events').values(events).returning('seq').execute();
  const seqs = rows.map((r) => r.seq);
  await sql`SELECT pg_notify(${EVENTS_CHANNEL}, ${String(Math.max(...seqs))})`.execute(trx);
  return seqs;
}

/**
 * The PostgreSQL engine: a pg Pool behind Kysely's PostgresDialect, migrated on open with the same migrations as
 * SQLite (engine/migrations.ts). The applied versions are rows of `schema_migrations`; several control planes
 * starting at once serialize on a transaction-scoped advisory lock, so each migration runs exactly once.
 *
 * 64-bit integers (bigint, and the numeric of SUM over them) come back as JS numbers, as SQLite's do, so a row
 * reads the same on both engines; a value past 2^53 is refused rather than silently rounded.
 */
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { causeChain, silentLog, type LogSink } from '../../log.js';
import { compileMigrations } from './migrations.js';
import type { Database } from './schema.js';

/** pg_advisory_xact_lock key of the migration runner ("computer migrate"); the leader lock uses another. */
export const MIGRATION_LOCK_KEY = 0x636d6967;

const INT8_OID = 20;
const NUMERIC_OID = 1700;

function toNumber(text: string): number {
  const n = Number(text);
  if (Number.isInteger(n) && !Number.isSafeInteger(n)) throw new RangeError(`integer ${text} is past what a JS number holds exactly`);
  return n;
}

/** The type parsers every connection of ours uses (per client, never pg's global registry). */
export const PG_TYPES = new pg.TypeOverrides();
PG_TYPES.setTypeParser(INT8_OID, 'text', toNumber);
PG_TYPES.setTypeParser(NUMERIC_OID, 'text', toNumber);

export interface PostgresEngine {
  db: Kysely<Database>;
  pool: pg.Pool;
  close(): Promise<void>;
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url);
}

/**
 * Opens a pool on `url` (a DATABASE_URL) and migrates the database forward. An idle connection the server drops
 * (a restart, a failover) is logged and replaced by the pool on next use: it must not end the process.
 */
export async function openPostgres(url: string, opts: { max?: number; log?: LogSink } = {}): Promise<PostgresEngine> {
  const pool = new pg.Pool({ connectionString: url, types: PG_TYPES, max: opts.max ?? 10 });
  const log = opts.log ?? silentLog;
  pool.on('error', (e) => log({ event: 'postgres.idle_connection_lost', error: causeChain(e) }));
  try {
    await migratePostgres(pool);
  } catch (e) {
    await pool.end();
    throw e;
  }
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, pool, close: () => db.destroy() };
}

/**
 * Applies every migration newer than the highest recorded (up to `to`, for tests that build an older
 * database), each in its own transaction under the lock. Returns the version the database is at.
 */
export async function migratePostgres(pool: pg.Pool, to = Number.POSITIVE_INFINITY): Promise<number> {
  const client = await pool.connect();
  try {
    const migrations = compileMigrations('postgres');
    for (;;) {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
        await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at text NOT NULL)');
        const current = (await client.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations')).rows[0]!.v ?? 0;
        const next = migrations.find((m) => m.version > current && m.version <= to);
        if (!next) {
          await client.query('COMMIT');
          return current;
        }
        for (const statement of next.statements) await client.query(statement);
        await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [next.version, next.name, new Date().toISOString()]);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw e;
      }
    }
  } finally {
    client.release();
  }
}

/** The schema version a PostgreSQL database records (0: none yet). */
export async function postgresSchemaVersion(pool: pg.Pool): Promise<number> {
  const table = await pool.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  if (table.rows[0]!.t === null) return 0;
  return (await pool.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations')).rows[0]!.v ?? 0;
}

/**
 * The SQLite engine for Kysely: the file opened, tuned and migrated by store/db.ts (the one module of the
 * better-sqlite3 binding), driven through Kysely's SqliteDialect.
 */
import { Kysely, SqliteDialect } from 'kysely';
import { openSqlite } from '../db.js';
import type { Database } from './schema.js';

/** `exclusive`: see openSqlite (db.ts); the lock is taken by the first transaction the caller begins. */
export function openSqliteEngine(path: string, opts: { exclusive?: boolean } = {}): Kysely<Database> {
  return new Kysely<Database>({ dialect: new SqliteDialect({ database: openSqlite(path, opts) }) });
}

/**
 * Which engine the state lives on: PostgreSQL when DATABASE_URL is set (any number of control planes may share
 * it), else the embedded SQLite file in DATA_DIR. `openStoreDb` hands the services store/db.ts's asynchronous Db
 * over the chosen engine.
 */
import path from 'node:path';
import type { Kysely } from 'kysely';
import { DB_FILENAME, dbOver, openDb, type Db } from '../db.js';
import { isPostgresUrl, openPostgres } from './postgres.js';
import type { Database } from './schema.js';
import { openSqliteEngine } from './sqlite.js';
import type { Engine } from './migrations.js';

export interface OpenEngine {
  kind: Engine;
  db: Kysely<Database>;
  close(): Promise<void>;
}

export async function openEngine(opts: { databaseUrl?: string; dataDir: string }): Promise<OpenEngine> {
  if (opts.databaseUrl) {
    // The URL may carry a password: it is never repeated in an error or a log line.
    if (!isPostgresUrl(opts.databaseUrl)) throw new Error('DATABASE_URL must be a postgres:// or postgresql:// URL');
    const pg = await openPostgres(opts.databaseUrl);
    return { kind: 'postgres', db: pg.db, close: pg.close };
  }
  const db = openSqliteEngine(path.join(opts.dataDir, DB_FILENAME));
  return { kind: 'sqlite', db, close: () => db.destroy() };
}

/** The store's Db on the engine DATABASE_URL names (PostgreSQL), else on SQLite in DATA_DIR. */
export async function openStoreDb(opts: { databaseUrl?: string; dataDir: string }): Promise<Db> {
  if (!opts.databaseUrl) return openDb(path.join(opts.dataDir, DB_FILENAME));
  const e = await openEngine(opts);
  return dbOver(e.db, e.kind, 'postgres');
}

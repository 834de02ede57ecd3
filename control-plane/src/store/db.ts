/**
 * The one module that touches better-sqlite3. Everything else sees the asynchronous `Db`
 * below (Kysely over either engine), so the rest of the control plane never knows the driver.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import Sqlite from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import type { Database } from './engine/schema.js';
import type { Engine } from './engine/migrations.js';
import { compileMigrations, LATEST_VERSION } from './engine/migrations.js';

/** The database file inside DATA_DIR. */
export const DB_FILENAME = 'control-plane.sqlite';

/**
 * The store's door to its engine, asynchronous on both. Repositories build their queries on `q()`: inside `tx` that
 * is the transaction's own connection (found through AsyncLocalStorage, so a repository call inside a transaction
 * joins it without being handed anything), elsewhere the engine's pool (PostgreSQL) or its one connection, shared
 * under Kysely's mutex (SQLite).
 */
export interface Db {
  readonly engine: Engine;
  /** The SQLite file, or `postgres` (never the URL: it may carry a password). */
  readonly path: string;
  q(): Kysely<Database>;
  /**
   * Runs `fn` in one transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: READ COMMITTED, so a conditional UPDATE is a
   * compare-and-set and a count that must hold takes a row lock first); a call inside one joins it.
   */
  tx<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Runs `fn` once the outermost transaction in progress commits (at once outside one; never if it
   * rolls back): side effects of a decision must not act on a write that may still be undone.
   */
  afterCommit(fn: () => void): void;
  /**
   * Inside a transaction, `fn`'s result for `key` once (kept in `memo`): a later call with the same key in the same
   * transaction shares it (outside one, `fn` each time; a rejected one is shared too, as the transaction fails). For what cannot change while the transaction holds the lock `fn` took,
   * e.g. the organization's billing basis a create's quota checks each read (services/quotas.ts `basis`).
   */
  once<T>(memo: TxMemo<T>, key: string, fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** One kind of result `Db.once` keeps per transaction (its own table, so each kind keeps its type). */
export class TxMemo<T> {
  readonly byTx = new WeakMap<object, Map<string, Promise<T>>>();
}

/**
 * The database file opened, tuned and migrated: for `openDb` below, and for the Kysely SQLite engine
 * (engine/sqlite.ts), which must not import the binding itself.
 */
export function openSqlite(path: string, opts: { exclusive?: boolean } = {}): Sqlite.Database {
  // fileMustExist with `exclusive`: a one-shot admin command reads an existing deployment, never creates one.
  const db = new Sqlite(path, { fileMustExist: opts.exclusive === true });
  // exclusive: this connection never releases its file locks, so it cannot open the file while another connection
  // (a serving control plane, which holds its own for its whole life) has it open, and none can open it until this
  // one closes (admin/move-up.ts). Set before the first access, as SQLite requires.
  try {
    if (opts.exclusive) db.pragma('locking_mode = EXCLUSIVE');
    // WAL lets readers proceed during a write; synchronous=FULL fsyncs the WAL at every commit, so a
    // write the API has acknowledged survives a power loss, not only a process crash (NORMAL would not).
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    db.pragma(`busy_timeout = ${opts.exclusive ? 1000 : 5000}`);
    migrate(db);
  } catch (e) {
    db.close();
    throw e;
  }
  return db;
}

/** The SQLite file in DATA_DIR, opened (synchronously: it is a file) and migrated. */
export function openDb(path: string): Db {
  const sqlite = openSqlite(path);
  // Kysely hands the file to its driver only at the first query: a Db closed before any must close the file itself.
  return dbOver(new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) }), 'sqlite', path, () => {
    if (sqlite.open) sqlite.close();
  });
}

interface TxContext {
  q: Kysely<Database>;
  pending: Array<() => void>;
  /** Set at commit or rollback: work the transaction started and did not await falls back to the engine. */
  done: boolean;
}

const BEGIN: Record<Engine, string> = { sqlite: 'BEGIN IMMEDIATE', postgres: 'BEGIN' };

/** A Db over an open Kysely engine (SQLite from `openDb`, PostgreSQL from engine/open.ts). */
export function dbOver(k: Kysely<Database>, engine: Engine, path: string, closed: () => void = () => undefined): Db {
  const als = new AsyncLocalStorage<TxContext>();
  const q = (): Kysely<Database> => {
    const ctx = als.getStore();
    return ctx && !ctx.done ? ctx.q : k;
  };
  return {
    engine,
    path,
    q,
    async tx<T>(fn: () => Promise<T>): Promise<T> {
      const outer = als.getStore();
      if (outer && !outer.done) return fn();
      const ctx: TxContext = { q: k, pending: [], done: false };
      const out = await k.connection().execute(async (conn) => {
        ctx.q = conn;
        await sql.raw(BEGIN[engine]).execute(conn);
        try {
          const r = await als.run(ctx, fn);
          await sql.raw('COMMIT').execute(conn);
          ctx.done = true;
          return r;
        } catch (e) {
          ctx.done = true;
          await sql.raw('ROLLBACK').execute(conn).catch(() => undefined);
          throw e;
        }
      });
      for (const f of ctx.pending.splice(0)) f();
      return out;
    },
    afterCommit(fn) {
      const ctx = als.getStore();
      if (ctx && !ctx.done) ctx.pending.push(fn);
      else fn();
    },
    once(memo, key, fn) {
      const ctx = als.getStore();
      if (!ctx || ctx.done) return fn();
      let kept = memo.byTx.get(ctx);
      if (!kept) memo.byTx.set(ctx, (kept = new Map()));
      const known = kept.get(key);
      if (known) return known;
      const p = fn();
      kept.set(key, p);
      return p;
    },
    close: async () => {
      await k.destroy();
      closed();
    },
  };
}

/**
 * Applies, in order and each in its own transaction, every migration newer than the stored version: the one set
 * both engines run (engine/migrations.ts), its version in `PRAGMA user_version` as before it.
 */
function migrate(db: Sqlite.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current >= LATEST_VERSION) return;
  for (const m of compileMigrations('sqlite')) {
    if (m.version <= current) continue;
    db.transaction(() => {
      for (const statement of m.statements) db.exec(statement);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
  }
}

/** The SQLite file's schema version (`PRAGMA user_version`, which no query builder spells). */
export async function schemaVersion(db: Db): Promise<number> {
  return (await sql<{ user_version: number }>`PRAGMA user_version`.execute(db.q())).rows[0]!.user_version;
}

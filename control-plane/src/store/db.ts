/**
 * The one module that touches better-sqlite3. Everything else sees the small `Db` interface, so the
 * rest of the control plane can be read (and faked) without knowing the driver.
 */
import Database from 'better-sqlite3';
import { compileMigrations, LATEST_VERSION } from './engine/migrations.js';

/** The database file inside DATA_DIR. */
export const DB_FILENAME = 'control-plane.sqlite';

export type SqlValue = string | number | bigint | null | Buffer;
export type Params = SqlValue[] | Record<string, SqlValue>;

export interface Db {
  run(sql: string, params?: Params): { changes: number };
  get<T>(sql: string, params?: Params): T | undefined;
  all<T>(sql: string, params?: Params): T[];
  /** Runs `fn` in one IMMEDIATE transaction; nested calls join the outer one. */
  tx<T>(fn: () => T): T;
  /**
   * Runs `fn` once the outermost transaction in progress commits (at once outside one; never if it
   * rolls back): side effects of a decision must not act on a write that may still be undone.
   */
  afterCommit(fn: () => void): void;
  close(): void;
  readonly path: string;
}

/**
 * The database file opened, tuned and migrated: for `openDb` below, and for the Kysely SQLite engine
 * (engine/sqlite.ts), which must not import the binding itself.
 */
export function openSqlite(path: string, opts: { exclusive?: boolean } = {}): Database.Database {
  // fileMustExist with `exclusive`: a one-shot admin command reads an existing deployment, never creates one.
  const db = new Database(path, { fileMustExist: opts.exclusive === true });
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

export function openDb(path: string): Db {
  const db = openSqlite(path);

  const cache = new Map<string, Database.Statement>();
  const stmt = (sql: string) => {
    let s = cache.get(sql);
    if (!s) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };
  const pending: Array<() => void> = [];
  const bind = (params?: Params) => (params === undefined ? [] : Array.isArray(params) ? params : [params]);

  return {
    path,
    run: (sql, params) => ({ changes: stmt(sql).run(...bind(params)).changes }),
    get: <T>(sql: string, params?: Params) => stmt(sql).get(...bind(params)) as T | undefined,
    all: <T>(sql: string, params?: Params) => stmt(sql).all(...bind(params)) as T[],
    tx: <T>(fn: () => T): T => {
      if (db.inTransaction) return fn();
      let out: T;
      try {
        out = db.transaction(fn).immediate();
      } catch (e) {
        pending.length = 0;
        throw e;
      }
      for (const f of pending.splice(0)) f();
      return out;
    },
    afterCommit(fn) {
      if (db.inTransaction) pending.push(fn);
      else fn();
    },
    close: () => db.close(),
  };
}

/**
 * Applies, in order and each in its own transaction, every migration newer than the stored version: the one set
 * both engines run (engine/migrations.ts), its version in `PRAGMA user_version` as before it.
 */
function migrate(db: Database.Database): void {
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

export function schemaVersion(db: Db): number {
  return db.get<{ user_version: number }>('PRAGMA user_version')!.user_version;
}

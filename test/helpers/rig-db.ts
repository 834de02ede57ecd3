/**
 * The database a rig opens: SQLite in the rig's data dir, or — when the file runs on PostgreSQL
 * (`COMPUTER_TEST_ENGINE=postgres`, set by the wrappers in test/postgres/) — a fresh database on one throwaway
 * cluster per test process (helpers/postgres.ts), stopped when the file's tests end. The same suite, unchanged, runs
 * on both engines.
 */
import path from 'node:path';
import t from 'tap';
import { DB_FILENAME, openDb, type Db } from '../../control-plane/src/store/db.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import { startPostgres, type TestPostgres } from './postgres.js';

export const TEST_ENGINE: 'sqlite' | 'postgres' = process.env.COMPUTER_TEST_ENGINE === 'postgres' ? 'postgres' : 'sqlite';

let cluster: Promise<TestPostgres> | null = null;
let databases = 0;

function postgres(): Promise<TestPostgres> {
  if (!cluster) {
    const started = startPostgres();
    cluster = started;
    t.teardown(async () => (await started).stop());
  }
  return cluster;
}

/** A database URL for a new, empty database on this process's cluster (PostgreSQL runs only). */
export async function freshDatabaseUrl(): Promise<string> {
  return (await postgres()).createDatabase(`rig_${process.pid}_${++databases}`);
}

/**
 * `dir`'s database. With `reuse` (a rig restarted on the same data dir) the PostgreSQL run reopens the database that
 * dir was given the first time, as a restarted control plane on the same DATABASE_URL would. A child process that
 * stands in for this one's control plane (the crash drills' helpers/crash-child.ts) is given that URL in its
 * environment (`DATABASE_URL_ENV`) and opens it for every dir, instead of starting a cluster of its own.
 */
export const DATABASE_URL_ENV = 'COMPUTER_TEST_DATABASE_URL';
const byDir = new Map<string, string>();
async function urlOf(dir: string): Promise<string> {
  const given = process.env[DATABASE_URL_ENV];
  if (given) return given;
  let url = byDir.get(dir);
  if (!url) byDir.set(dir, (url = await freshDatabaseUrl()));
  return url;
}

export async function openRigDb(dir: string): Promise<Db> {
  if (TEST_ENGINE === 'sqlite') return openDb(path.join(dir, DB_FILENAME));
  return openStoreDb({ databaseUrl: await urlOf(dir), dataDir: dir });
}

/** The environment that gives a child process `dir`'s database (PostgreSQL runs; nothing on SQLite, where the file in `dir` is it). */
export async function childDatabaseEnv(dir: string): Promise<Record<string, string>> {
  return TEST_ENGINE === 'sqlite' ? {} : { [DATABASE_URL_ENV]: await urlOf(dir) };
}

/** The environment a rig's configuration adds for `dir`: its DATABASE_URL on PostgreSQL (what the operator CLI reads). */
export async function rigDatabaseEnv(dir: string): Promise<Record<string, string>> {
  return TEST_ENGINE === 'sqlite' ? {} : { DATABASE_URL: await urlOf(dir) };
}

#!/usr/bin/env node
/**
 * `computer-admin` (package.json `bin`, built by `npm run build`): the operator's commands on a deployment's state.
 * Reads DATABASE_URL (PostgreSQL; never printed: it may hold a password), else the SQLite file in DATA_DIR (default
 * ./data), which must exist (a command never creates a deployment). Runs beside serving control planes.
 *
 * Exit 0: done; 1: refused or failed; 2: a command line it cannot run.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DB_FILENAME, type Db } from '../store/db.js';
import { openStoreDb } from '../store/engine/open.js';
import { isPostgresUrl } from '../store/engine/postgres.js';
import { drainRepo } from '../store/repos/drain.js';
import { hostsRepo } from '../store/repos/hosts.js';
import { machinesRepo } from '../store/repos/machines.js';
import { ADMIN_ERRORS, AdminError } from './admin-errors.js';
import { runHosts } from './hosts.js';

export interface AdminDeps {
  env: Record<string, string | undefined>;
  out(line: string): void;
  err(line: string): void;
  /** Pins the clock heartbeat ages count on (tests). */
  now?: () => number;
  /** Between two reads of a drain's progress (tests shorten it; default 1 s). */
  pollMs?: number;
}

async function openDeployment(env: AdminDeps['env']): Promise<Db> {
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl !== undefined && !isPostgresUrl(databaseUrl)) throw ADMIN_ERRORS.notPostgres();
  const dataDir = env.DATA_DIR || './data';
  if (databaseUrl === undefined && !fs.existsSync(path.join(dataDir, DB_FILENAME))) throw ADMIN_ERRORS.noDeployment(path.join(dataDir, DB_FILENAME));
  return openStoreDb({ databaseUrl, dataDir });
}

/** The command table: group → runner. */
const GROUPS = { hosts: runHosts } as const;

export async function runAdmin(argv: string[], d: AdminDeps): Promise<number> {
  const [group, ...args] = argv;
  try {
    if (group !== 'hosts') throw ADMIN_ERRORS.usage();
    const db = await openDeployment(d.env);
    try {
      const machines = machinesRepo(db);
      return await GROUPS[group](args, {
        engine: db.engine, hosts: hostsRepo(db), drain: drainRepo(db), onHost: (id) => machines.onHost(id), out: d.out, now: d.now, pollMs: d.pollMs,
      });
    } finally {
      await db.close();
    }
  } catch (e) {
    if (e instanceof AdminError) {
      d.err(`computer-admin: ${e.message}`);
      return e.exitCode;
    }
    // pg's and SQLite's messages name the failure, never the URL's password.
    d.err(`computer-admin: failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await runAdmin(process.argv.slice(2), {
    env: process.env,
    out: (l) => process.stdout.write(`${l}\n`),
    err: (l) => process.stderr.write(`${l}\n`),
  });
}

/**
 * Moving up (issue 24 item 4): one-shot copy of a SQLite deployment (DATA_DIR's control-plane.sqlite, migrated
 * forward first) into an EMPTY PostgreSQL database, then a per-table comparison of the two sides.
 *
 *   npm run move-up -- --data-dir ./data --to postgres://user:pass@host/db [--verify] [--batch 500]
 *   node dist/control-plane/src/admin/move-up.js …   (what the script runs; issue 25's computer-admin can absorb it)
 *
 * - The SQLite file is opened in EXCLUSIVE locking mode and held in one read transaction for the whole run: it is
 *   refused while anything else has the file open (a serving control plane holds its connection for its whole life)
 *   and nothing can open it until the command ends. Nothing is written to it beyond the forward migration.
 * - PostgreSQL is migrated to the same version, then everything happens in ONE transaction: every table locked,
 *   refused unless all are empty, copied in dependency order in batches, identity sequences advanced past the copied
 *   ids (and past SQLite's AUTOINCREMENT high-water mark), compared (table-digest.ts); any mismatch rolls it all back.
 * - `--verify` copies nothing: it compares an existing copy with the SQLite file (after a move, before switching).
 *
 * Prints one line per table: rows and SHA-256 on each side. Exit 0: equal; 1: a mismatch (or a failure);
 * 2: refused (usage, DATA_DIR in use, target not empty). The target URL (it may hold a password) is never printed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { sql, type Kysely } from 'kysely';
import { DB_FILENAME } from '../store/db.js';
import { isPostgresUrl, openPostgres } from '../store/engine/postgres.js';
import type { Database } from '../store/engine/schema.js';
import { openSqliteEngine } from '../store/engine/sqlite.js';
import { COPY_PLAN, digestTable, scanTable, type Row, type TableDigest, type TablePlan } from './table-digest.js';

export const DEFAULT_BATCH = 500;

export interface MoveUpOptions {
  dataDir: string;
  /** The target's postgres:// URL. */
  to: string;
  /** Compare only (no copy). */
  verify?: boolean;
  batch?: number;
}

export interface TableReport {
  table: string;
  sqlite: TableDigest;
  postgres: TableDigest;
}

/** A run refused before anything was copied (exit 2). */
export class MoveUpRefused extends Error {
  override name = 'MoveUpRefused';
}

/** A copy whose two sides differ: rolled back (exit 1). */
class CopyMismatch extends Error {
  constructor(readonly reports: TableReport[]) {
    super('the copy differs from the SQLite file: rolled back, nothing was written to PostgreSQL');
  }
}

export const REFUSALS = {
  notPostgres: () => new MoveUpRefused('--to must be a postgres:// or postgresql:// URL'),
  noDeployment: (file: string) => new MoveUpRefused(`no SQLite deployment at ${file}`),
  inUse: (dataDir: string) =>
    new MoveUpRefused(`${dataDir} is in use (a control plane, or another command, has its database open): stop it, then run move-up again`),
  notEmpty: (tables: string[]) =>
    new MoveUpRefused(`the PostgreSQL database is not empty (rows in ${tables.join(', ')}): move-up copies only into an empty database`),
  unknownTables: (tables: string[]) => new MoveUpRefused(`the SQLite file has tables this build does not know how to copy: ${tables.join(', ')}`),
};

function isBusy(e: unknown): boolean {
  return e instanceof Error && 'code' in e && (e.code === 'SQLITE_BUSY' || e.code === 'SQLITE_LOCKED');
}

/** The deployment's SQLite file, migrated forward and locked for this run (see the header). */
async function openSource(dataDir: string): Promise<Kysely<Database>> {
  const file = path.join(dataDir, DB_FILENAME);
  if (!fs.existsSync(file)) throw REFUSALS.noDeployment(file);
  let db: Kysely<Database> | null = null;
  try {
    db = openSqliteEngine(file, { exclusive: true });
    // A read transaction held to the end: one consistent view, and the exclusive lock taken now.
    await sql`BEGIN EXCLUSIVE`.execute(db);
  } catch (e) {
    await db?.destroy();
    throw isBusy(e) ? REFUSALS.inUse(dataDir) : e;
  }
  const { rows } = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, 7) <> 'sqlite_' ORDER BY name`.execute(db);
  const known = new Set<string>(COPY_PLAN.map((p) => p.table));
  const unknown = rows.map((r) => r.name).filter((n) => !known.has(n));
  if (unknown.length) {
    await db.destroy();
    throw REFUSALS.unknownTables(unknown);
  }
  return db;
}

async function insertBatch(db: Kysely<Database>, plan: TablePlan, rows: Row[]): Promise<void> {
  const columns = Object.keys(rows[0]!);
  const values = rows.map((r) => sql`(${sql.join(columns.map((c) => r[c]))})`);
  await sql`INSERT INTO ${sql.table(plan.table)} (${sql.join(columns.map((c) => sql.ref(c)))}) VALUES ${sql.join(values)}`.execute(db);
}

/** Rows per INSERT, so that rows × columns stays well under PostgreSQL's 65535 parameters. */
function insertRows(batch: number): number {
  return Math.min(batch, 2000);
}

/**
 * Every identity/serial column of the copied tables moved past the highest copied value, and past what SQLite's
 * AUTOINCREMENT had handed out (rows since deleted keep their numbers retired: an events cursor never sees a seq twice).
 */
async function advanceSequences(pg: Kysely<Database>, lite: Kysely<Database>): Promise<void> {
  const { rows } = await sql<{ table_name: string; column_name: string }>`
    SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')`.execute(pg);
  const planned = new Set<string>(COPY_PLAN.map((p) => p.table));
  for (const { table_name: table, column_name: column } of rows.filter((r) => planned.has(r.table_name))) {
    const copied = (await sql<{ m: number | null }>`SELECT max(${sql.ref(column)}) AS m FROM ${sql.table(table)}`.execute(pg)).rows[0]!.m ?? 0;
    const issued = (await sql<{ seq: number }>`SELECT seq FROM sqlite_sequence WHERE name = ${table}`.execute(lite)).rows[0]?.seq ?? 0;
    const high = Math.max(copied, issued);
    // setval(seq, 1, false): nothing issued yet, the next value is 1.
    await sql`SELECT setval(pg_get_serial_sequence(${table}, ${column}), ${Math.max(high, 1)}, ${high > 0})`.execute(pg);
  }
}

async function compare(lite: Kysely<Database>, pg: Kysely<Database>, batch: number): Promise<TableReport[]> {
  const out: TableReport[] = [];
  for (const plan of COPY_PLAN) {
    out.push({ table: plan.table, sqlite: await digestTable(lite, 'sqlite', plan, batch), postgres: await digestTable(pg, 'postgres', plan, batch) });
  }
  return out;
}

export function matches(r: TableReport): boolean {
  return r.sqlite.rows === r.postgres.rows && r.sqlite.sha256 === r.postgres.sha256;
}

async function copyAll(lite: Kysely<Database>, trx: Kysely<Database>, batch: number): Promise<TableReport[]> {
  const tables = sql.join(COPY_PLAN.map((p) => sql.table(p.table)));
  // Nothing else (a control plane already pointed at this database) reads or writes them until the commit.
  await sql`LOCK TABLE ${tables} IN ACCESS EXCLUSIVE MODE`.execute(trx);
  const nonEmpty: string[] = [];
  for (const plan of COPY_PLAN) {
    const { rows } = await sql<{ one: number }>`SELECT 1 AS one FROM ${sql.table(plan.table)} LIMIT 1`.execute(trx);
    if (rows.length) nonEmpty.push(plan.table);
  }
  if (nonEmpty.length) throw REFUSALS.notEmpty(nonEmpty);
  for (const plan of COPY_PLAN) await scanTable(lite, 'sqlite', plan, insertRows(batch), (rows) => insertBatch(trx, plan, rows));
  await advanceSequences(trx, lite);
  const reports = await compare(lite, trx, batch);
  if (!reports.every(matches)) throw new CopyMismatch(reports);
  return reports;
}

/**
 * Copies (or, with `verify`, only compares) and returns the per-table reports. Throws MoveUpRefused when refused;
 * a copy that does not compare equal is rolled back and its reports returned with `ok: false`.
 */
export async function moveUp(opts: MoveUpOptions): Promise<{ ok: boolean; reports: TableReport[] }> {
  if (!isPostgresUrl(opts.to)) throw REFUSALS.notPostgres();
  const batch = opts.batch ?? DEFAULT_BATCH;
  const lite = await openSource(opts.dataDir);
  try {
    const target = await openPostgres(opts.to, { max: 2 });
    try {
      if (opts.verify) {
        const reports = await compare(lite, target.db, batch);
        return { ok: reports.every(matches), reports };
      }
      const reports = await target.db.transaction().execute((trx) => copyAll(lite, trx, batch));
      return { ok: true, reports };
    } catch (e) {
      if (e instanceof CopyMismatch) return { ok: false, reports: e.reports };
      throw e;
    } finally {
      await target.close();
    }
  } finally {
    await sql`ROLLBACK`.execute(lite).catch(() => undefined);
    await lite.destroy();
  }
}

/** The printed table: one line per table, both sides' rows and SHA-256, and whether they agree. */
export function formatReports(reports: TableReport[]): string[] {
  const width = Math.max(...reports.map((r) => r.table.length));
  return [
    `${'table'.padEnd(width)}  ${'sqlite rows'.padStart(11)}  ${'postgres rows'.padStart(13)}  sqlite sha256 / postgres sha256`,
    ...reports.map((r) => {
      const same = r.sqlite.sha256 === r.postgres.sha256;
      const sums = same ? `${r.sqlite.sha256} (both)` : `${r.sqlite.sha256} / ${r.postgres.sha256}`;
      return `${r.table.padEnd(width)}  ${String(r.sqlite.rows).padStart(11)}  ${String(r.postgres.rows).padStart(13)}  ${sums}  ${matches(r) ? 'ok' : 'MISMATCH'}`;
    }),
  ];
}

const USAGE = 'usage: move-up --data-dir <DATA_DIR> --to <postgres://…> [--verify] [--batch <rows>]';

/** The command: parses `argv`, runs, prints through `out`; returns the exit code. */
export async function runMoveUp(argv: string[], out: (line: string) => void): Promise<number> {
  let opts: MoveUpOptions;
  try {
    const { values } = parseArgs({
      args: argv,
      options: { 'data-dir': { type: 'string' }, to: { type: 'string' }, verify: { type: 'boolean' }, batch: { type: 'string' } },
      strict: true,
    });
    const batch = values.batch === undefined ? DEFAULT_BATCH : Number(values.batch);
    if (!values['data-dir'] || !values.to || !Number.isSafeInteger(batch) || batch < 1 || batch > 100_000) throw new Error(USAGE);
    opts = { dataDir: values['data-dir'], to: values.to, verify: values.verify === true, batch };
  } catch {
    // parseArgs' own messages may quote an argument (the URL): only the usage line is printed.
    out(USAGE);
    return 2;
  }
  try {
    const { ok, reports } = await moveUp(opts);
    for (const line of formatReports(reports)) out(line);
    if (!ok) {
      out(opts.verify ? 'move-up: MISMATCH: the PostgreSQL copy differs from the SQLite file' : 'move-up: MISMATCH: the copy was rolled back, PostgreSQL is unchanged');
      return 1;
    }
    out(opts.verify ? 'move-up: the PostgreSQL copy matches the SQLite file' : `move-up: copied ${reports.reduce((n, r) => n + r.sqlite.rows, 0)} rows in ${reports.length} tables, every table verified`);
    return 0;
  } catch (e) {
    if (e instanceof MoveUpRefused) {
      out(`move-up: refused: ${e.message}`);
      return 2;
    }
    // pg's and SQLite's messages name the failure, not the URL's password.
    out(`move-up: failed: ${(e as Error)?.message ?? String(e)}`);
    return 1;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await runMoveUp(process.argv.slice(2), (line) => process.stdout.write(`${line}\n`));
}

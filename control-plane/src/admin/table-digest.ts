/**
 * Every table of the state, in dependency order, read the same way on both engines: in primary-key order, in
 * batches, each row reduced to one canonical line, the lines hashed (SHA-256). move-up.ts copies with the reader and
 * compares the digests of the two sides.
 *
 * Canonical row: a JSON array of `[column, value]` pairs sorted by column name, then "\n". Values:
 *   - text as its JSON string; NULL as null;
 *   - integers as JSON decimal numbers (SQLite INTEGER and PostgreSQL bigint both read as JS numbers; one past
 *     2^53 is an error on PostgreSQL's side, engine/postgres.ts, and refused here on either);
 *   - bytes (SQLite BLOB, PostgreSQL bytea) as `{"bytes":"<lowercase hex>"}`, an object no text value can be.
 * Order: by the primary key, text compared byte by byte (SQLite's BINARY collation; `COLLATE "C"` on PostgreSQL,
 * whose default collation may order differently), integers numerically.
 */
import { createHash } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Engine } from '../store/engine/migrations.js';
import type { Database } from '../store/engine/schema.js';

export type TableName = keyof Database;

export interface TablePlan {
  table: TableName;
  /** The primary key's columns, in order. */
  key: readonly string[];
  /** Is the key text (compared as bytes) or an integer? */
  keyType: 'text' | 'integer';
}

const byId = (table: TableName): TablePlan => ({ table, key: ['id'], keyType: 'text' });
const by = (table: TableName, ...key: string[]): TablePlan => ({ table, key, keyType: 'text' });

/**
 * Every table, parents before children (the migrations' order, which their foreign keys follow; `hosts`, from
 * version 11, comes before `machines`, which references it).
 */
export const COPY_PLAN: readonly TablePlan[] = [
  byId('users'),
  byId('organizations'),
  byId('memberships'),
  byId('invitations'),
  byId('api_keys'),
  byId('auth_sessions'),
  by('rate_limits', 'bucket'),
  by('billing_accounts', 'org_id'),
  byId('billing_events'),
  by('billing_links', 'token_hash'),
  byId('entitlement_overrides'),
  byId('hosts'),
  byId('machines'),
  byId('sessions'),
  by('input_leases', 'machine_id'),
  { table: 'machine_events', key: ['seq'], keyType: 'integer' },
  byId('snapshots'),
  byId('templates'),
  byId('machine_secrets'),
  byId('previews'),
  byId('usage_records'),
  by('meter_cursors', 'source_id'),
  by('usage_summaries', 'org_id', 'period_start'),
  by('stripe_customers', 'org_id'),
  byId('stripe_webhook_events'),
  by('stripe_meter_reports', 'org_id', 'period_start', 'meter'),
  by('volume_restarts', 'machine_id'),
  by('cluster_keys', 'name'),
];

export type Row = Record<string, unknown>;

export interface TableDigest {
  rows: number;
  sha256: string;
}

function canonicalValue(table: string, column: string, v: unknown): string | number | null | { bytes: string } {
  if (v === null || typeof v === 'string') return v;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`${table}.${column}: ${v} is not an integer a JS number holds exactly`);
    return v;
  }
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex') };
  throw new TypeError(`${table}.${column}: a value of type ${typeof v} has no canonical form`);
}

/** One row's canonical line (see the header). */
export function canonicalRow(table: string, row: Row): string {
  const pairs = Object.keys(row)
    .sort()
    .map((c) => [c, canonicalValue(table, c, row[c])]);
  return `${JSON.stringify(pairs)}\n`;
}

function keyColumn(engine: Engine, plan: TablePlan, column: string): RawBuilder<unknown> {
  return engine === 'postgres' && plan.keyType === 'text' ? sql`${sql.ref(column)} COLLATE "C"` : sql`${sql.ref(column)}`;
}

/**
 * The table's rows in key order, `batch` at a time (keyset pagination: `(k1, k2) > (last k1, last k2)`, a row
 * comparison both engines have), each batch handed to `each` before the next is read.
 */
export async function scanTable(db: Kysely<Database>, engine: Engine, plan: TablePlan, batch: number, each: (rows: Row[]) => Promise<void> | void): Promise<void> {
  const keys = sql.join(plan.key.map((c) => keyColumn(engine, plan, c)));
  let after: unknown[] | null = null;
  for (;;) {
    const where: RawBuilder<unknown> = after ? sql`WHERE (${keys}) > (${sql.join(after)})` : sql``;
    const { rows } = await sql<Row>`SELECT * FROM ${sql.table(plan.table)} ${where} ORDER BY ${keys} LIMIT ${batch}`.execute(db);
    if (rows.length === 0) return;
    await each(rows);
    if (rows.length < batch) return;
    const last = rows[rows.length - 1]!;
    after = plan.key.map((c) => last[c]);
  }
}

/** Row count and SHA-256 of the canonical lines, in key order. */
export async function digestTable(db: Kysely<Database>, engine: Engine, plan: TablePlan, batch: number): Promise<TableDigest> {
  const hash = createHash('sha256');
  let rows = 0;
  await scanTable(db, engine, plan, batch, (page) => {
    for (const row of page) hash.update(canonicalRow(plan.table, row));
    rows += page.length;
  });
  return { rows, sha256: hash.digest('hex') };
}

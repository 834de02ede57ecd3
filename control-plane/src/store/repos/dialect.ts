/**
 * What the repositories must say differently on the two engines, as data, so one query reads the same rows in the
 * same order on SQLite and PostgreSQL.
 *
 * - **Text order.** SQLite compares text byte by byte (BINARY). PostgreSQL compares it under the database's default
 *   collation, which follows the locale the cluster was created with: under `en_US.UTF-8` (glibc or ICU) letters
 *   fold case and punctuation (`_`, `-`, `:`) is ignored at the first level, so `AB_C` and `A_BC`, `Z` and `a`, or a
 *   keyset cursor compared with `>` would order differently from SQLite. Every ORDER BY and every `<`/`>` on text
 *   therefore names the byte order explicitly: `COLLATE "C"` on PostgreSQL (`binary`, the default anyway, on
 *   SQLite). Equality needs nothing (both collations are deterministic). The price on PostgreSQL: an index in the
 *   default collation serves the equality prefix (`org_id = …`) but not the order; the pages are per organization.
 * - **Insertion order.** SQLite's `rowid` breaks ties between rows of the same instant in insertion order;
 *   PostgreSQL has no such column, so there ties fall back to the id (fixed, but not insertion order). A table whose
 *   order is "as recorded" carries its own sequence instead, the same on both engines (machine_events and, since
 *   migration 12, billing_events: `seq`); `insertionKey` is left to the snapshots' chain.
 * - **Row locks.** `SELECT … FOR UPDATE` holds a row until the transaction ends on PostgreSQL; SQLite has no row
 *   locks and needs none (a transaction there is BEGIN IMMEDIATE: writers are serialized whole).
 */
import { sql, type Expression, type ExpressionBuilder, type OrderByItemBuilder, type RawBuilder, type SqlBool } from 'kysely';
import type { Engine } from '../engine/migrations.js';
import type { Keyset } from '../pagination.js';

const BYTE_COLLATION: Record<Engine, string> = { sqlite: 'binary', postgres: 'C' };
const INSERTION_KEY: Record<Engine, string> = { sqlite: 'rowid', postgres: 'id' };
const ROW_LOCK: Record<Engine, boolean> = { sqlite: false, postgres: true };

export interface Dialect {
  engine: Engine;
  /** `orderBy(column, d.asc)`: ascending, in byte order. */
  asc(ob: OrderByItemBuilder): OrderByItemBuilder;
  desc(ob: OrderByItemBuilder): OrderByItemBuilder;
  /** A text column (`table.column` or `column`) compared in byte order, for `<` and `>`. */
  bytes(ref: string): RawBuilder<string>;
  /** The column that orders rows of one instant as they were inserted (see above). */
  insertionKey: string;
  /** Whether `SELECT … FOR UPDATE` is said (and needed) on this engine. */
  rowLocks: boolean;
  /** Rows strictly after `after` in (created_at, id) order: the keyset of pagination.ts's `pageOf`. */
  after<DB, TB extends keyof DB>(eb: ExpressionBuilder<DB, TB>, after: Keyset, alias?: string): Expression<SqlBool>;
}

export function dialect(engine: Engine): Dialect {
  const collation = BYTE_COLLATION[engine];
  const bytes = (ref: string) => sql<string>`${sql.ref(ref)} collate ${sql.id(collation)}`;
  return {
    engine,
    asc: (ob) => ob.collate(collation),
    desc: (ob) => ob.collate(collation).desc(),
    bytes,
    insertionKey: INSERTION_KEY[engine],
    rowLocks: ROW_LOCK[engine],
    after(eb, k, alias) {
      const col = (c: string) => (alias ? `${alias}.${c}` : c);
      return eb.or([
        eb(bytes(col('created_at')), '>', k.created_at),
        eb.and([eb(sql.ref<string>(col('created_at')), '=', k.created_at), eb(bytes(col('id')), '>', k.id)]),
      ]);
    },
  };
}

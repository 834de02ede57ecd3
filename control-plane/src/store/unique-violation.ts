/**
 * A unique (or primary key) constraint refused a write, on either engine: better-sqlite3's `SQLITE_CONSTRAINT_UNIQUE`
 * / `SQLITE_CONSTRAINT_PRIMARYKEY`, PostgreSQL's SQLSTATE `23505` (unique_violation, for primary keys too).
 *
 * Why callers need it on PostgreSQL and never did on SQLite: a check-then-insert inside `db.tx` (an e-mail not yet
 * taken, a machine name free, a port not yet published) cannot race on SQLite, whose BEGIN IMMEDIATE serializes
 * whole write transactions; under PostgreSQL's READ COMMITTED two processes can both see the name free and both
 * insert, and the second insert fails on the unique index. That failure is the same conflict the check reports,
 * and must reach the caller as it (not as a 500).
 */
const UNIQUE_VIOLATION_CODES: ReadonlySet<string> = new Set(['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_CONSTRAINT_PRIMARYKEY', '23505']);

export function isUniqueViolation(e: unknown): boolean {
  return e instanceof Error && 'code' in e && typeof e.code === 'string' && UNIQUE_VIOLATION_CODES.has(e.code);
}

/**
 * Runs `write` (an insert or update inside the caller's transaction, after its check); a unique violation it raises
 * becomes `conflict()`, the error that check gives, and rolls the transaction back like it. Anything else passes.
 */
export async function conflictOnUnique<T>(write: Promise<T>, conflict: () => Error): Promise<T> {
  try {
    return await write;
  } catch (e) {
    throw isUniqueViolation(e) ? conflict() : e;
  }
}

/**
 * Thrown inside an `againOnUnique` attempt when its compare-and-set found the row it read moved by a concurrent
 * writer (PostgreSQL, READ COMMITTED: the conditional UPDATE waited for the winner and then matched nothing): like a
 * unique refusal, the attempt runs again and reads the winner's row. Internal: it reaches no caller unless every
 * attempt loses (then a 500).
 */
export class ConcurrentWrite extends Error {
  constructor() {
    super('a concurrent write moved the row this transaction read');
  }
}

/** Attempts in all: each round of a race has a winner, so this answers up to this many writers racing at once. */
const ATTEMPTS = 3;

/**
 * Runs `attempt` (a whole transaction: `db.tx(…)`, never a part of one) and, when a unique index refused its write
 * or it threw `ConcurrentWrite`, again (up to ATTEMPTS in all). For a check-then-write whose check is not a refusal
 * but an answer — a port published again answers with the existing preview, a secret stored again becomes its next
 * version: the race's loser (PostgreSQL, two processes past the check at once) is answered as a call after the
 * winner's is, because the next attempt's check reads the winner's committed row (READ COMMITTED: each statement
 * sees what committed before it began). On SQLite the check cannot race and the retry never runs.
 */
export async function againOnUnique<T>(attempt: () => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (e) {
      if (i >= ATTEMPTS || !(isUniqueViolation(e) || e instanceof ConcurrentWrite)) throw e;
    }
  }
}

/**
 * What a write changed, as the repositories report it: `{ changes }` (rows written) like the synchronous store did,
 * from Kysely's per-statement results on either engine (numbers, never bigints).
 */
import type { DeleteResult, InsertResult, UpdateResult } from 'kysely';

export interface Changes {
  changes: number;
}

export function changes(r: UpdateResult | DeleteResult | InsertResult | undefined): Changes {
  if (r === undefined) return { changes: 0 };
  if ('numUpdatedRows' in r) return { changes: Number(r.numUpdatedRows) };
  if ('numDeletedRows' in r) return { changes: Number(r.numDeletedRows) };
  return { changes: Number(r.numInsertedOrUpdatedRows ?? 0n) };
}

/** True when the statement wrote exactly one row: a compare-and-set that won, an insert that was not ignored. */
export const one = (r: UpdateResult | DeleteResult | InsertResult | undefined): boolean => changes(r).changes === 1;

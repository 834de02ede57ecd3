import { invalid } from '../../../shared/errors.js';
import { DEFAULT_PAGE_SIZE, type Page, type PageQuery } from '../../../shared/schemas/pagination.js';

/** Keyset pagination over (created_at, id), ascending. The cursor is opaque to clients. */
export interface Keyset {
  created_at: string;
  id: string;
}

export function encodeCursor(k: Keyset): string {
  return Buffer.from(JSON.stringify([k.created_at, k.id]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string | undefined): Keyset | null {
  if (cursor === undefined) return null;
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') {
      return { created_at: v[0], id: v[1] };
    }
  } catch {
    /* fall through */
  }
  throw invalid('The cursor is not one this server issued.', [{ field: 'cursor', message: 'invalid cursor' }]);
}

/**
 * Runs `fetch(after, limit + 1)` and turns the extra row into `next_cursor`. `fetch` must order by
 * (created_at, id) and return rows strictly after `after` (repos/dialect.ts's `after`, in byte order on both engines).
 */
export async function pageOf<R extends Keyset, T>(q: PageQuery, fetch: (after: Keyset, limit: number) => Promise<R[]>, view: (r: R) => T): Promise<Page<T>> {
  const limit = q.limit ?? DEFAULT_PAGE_SIZE;
  const after = decodeCursor(q.cursor) ?? { created_at: '', id: '' };
  const rows = await fetch(after, limit + 1);
  const more = rows.length > limit;
  const shown = more ? rows.slice(0, limit) : rows;
  return { data: shown.map(view), next_cursor: more ? encodeCursor(shown[shown.length - 1]!) : null };
}

import { z } from 'zod';
import { queryInt } from './common.js';

/** Every list route pages the same way: `?limit=&cursor=` → `{ data: [...], next_cursor }`. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

export const PageQuery = z.strictObject({
  limit: queryInt(1, MAX_PAGE_SIZE).optional(),
  /** Opaque; pass back the `next_cursor` of the previous page unchanged. */
  cursor: z.string().min(1).max(512).optional(),
});
export type PageQuery = z.infer<typeof PageQuery>;

export interface Page<T> {
  data: T[];
  /** null on the last page. */
  next_cursor: string | null;
}

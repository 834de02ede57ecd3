/** Request parsing shared by the agent and the control plane (both are Hono apps). */
import type { Context } from 'hono';
import { invalid, parseOrThrow } from './errors.js';

type Schema<T> = { safeParse(v: unknown): { success: true; data: T } | { success: false; error: import('zod').ZodError } };

/** Read and validate a JSON body. Malformed JSON and schema failures are both `invalid_request`. */
export async function jsonBody<T>(c: Context, schema: Schema<T>): Promise<T> {
  let raw: unknown;
  const text = await c.req.text();
  try {
    raw = text.length ? JSON.parse(text) : {};
  } catch {
    throw invalid('Request body is not valid JSON.');
  }
  return parseOrThrow(schema, raw);
}

/** Validate the query string. Repeated parameters are refused rather than silently picking one. */
export function queryOf<T>(c: Context, schema: Schema<T>): T {
  const all = c.req.queries();
  const flat: Record<string, string> = {};
  for (const [k, v] of Object.entries(all)) {
    if (v.length > 1) throw invalid(`Query parameter ${k} is repeated.`, [{ field: k, message: 'given more than once' }]);
    flat[k] = v[0]!;
  }
  return parseOrThrow(schema, flat, 'query');
}

/**
 * The dashboard's only way to the API: same-origin fetch with the session cookie (never a token in
 * storage). Writes carry the browser's own Origin header, which the control plane checks (CSRF).
 * Types come from the shared schemas (type-only imports: nothing of zod reaches the bundle).
 */
import type { ErrorEnvelopeBody } from '../../../shared/schemas/responses.js';
import { quotaText, type Quota } from './view-logic.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The envelope's `quota` (quota_exceeded): what clients render instead of the message. */
    readonly quota: Quota | null = null,
  ) {
    super(message);
  }
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json as ErrorEnvelopeBody | undefined)?.error;
    throw new ApiError(res.status, e?.code ?? 'internal_error', e?.message ?? `HTTP ${res.status}`, e?.quota ?? null);
  }
  return json as T;
}

/** ws:// or wss:// URL of a gateway path on this origin (the cookie goes with the handshake). */
export function wsUrl(path: string): string {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${path}`;
}

/** An error as the page shows it: a quota refusal by its `quota` (the spec: clients render it, not the message). */
export function errorText(e: unknown): string {
  if (e instanceof ApiError && e.quota) return quotaText(e.quota);
  if (e instanceof ApiError) return `${e.message} (${e.code})`;
  return e instanceof Error ? e.message : String(e);
}

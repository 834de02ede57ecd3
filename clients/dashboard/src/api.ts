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

/**
 * Every request and channel of a signed-in page belongs to the signed-in scope. Signing out ends it first:
 * requests in flight are aborted and new ones refused before the session cookie is given up, so nothing
 * the page was still loading (a thumbnail, a poll) is answered 401 after the sign-out.
 */
let scope = new AbortController();
/** The auth routes work signed out (the first `me` answers 401 when nobody is signed in: that is how the page knows). */
const SIGNED_OUT_PATHS = new Set(['/v1/auth/me', '/v1/auth/login', '/v1/auth/signup', '/v1/auth/logout']);

/** Signed in (again): requests may go out. */
export function beginSignedIn(): void {
  if (scope.signal.aborted) scope = new AbortController();
}

/** Signing out: abort what is in flight, refuse what comes, until the next sign-in. */
export function endSignedIn(): void {
  scope.abort();
}

export class SignedOutError extends Error {
  constructor() {
    super('Signed out.');
  }
}

/** The signal a request of the signed-in page runs under; throws once signed out. */
export function signedInSignal(): AbortSignal {
  if (scope.signal.aborted) throw new SignedOutError();
  return scope.signal;
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const signal = SIGNED_OUT_PATHS.has(path) ? undefined : signedInSignal();
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (signal?.aborted) throw new SignedOutError();
    throw e;
  }
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

/** A gateway channel of the signed-in page; null once signed out (no handshake that would be refused). */
export function openChannel(path: string): WebSocket | null {
  if (scope.signal.aborted) return null;
  return new WebSocket(wsUrl(path));
}

/** An error as the page shows it: a quota refusal by its `quota` (the spec: clients render it, not the message). */
export function errorText(e: unknown): string {
  if (e instanceof ApiError && e.quota) return quotaText(e.quota);
  if (e instanceof ApiError) return `${e.message} (${e.code})`;
  return e instanceof Error ? e.message : String(e);
}

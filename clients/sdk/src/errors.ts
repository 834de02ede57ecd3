/** The API's one error envelope as a typed exception (shared/schemas/responses.ts ErrorEnvelope). */
import type { z } from 'zod';
import { ErrorEnvelope } from '../../../shared/schemas/responses.js';

export type ErrorBody = z.infer<typeof ErrorEnvelope>['error'];
export type Quota = NonNullable<ErrorBody['quota']>;

/** Every non-2xx answer: the envelope's fields, with `quota` as data on quota_exceeded. */
export class ComputerError extends Error {
  readonly code: string;
  readonly status: number;
  readonly requestId: string;
  readonly details: ErrorBody['details'];
  readonly quota: Quota | null;
  constructor(status: number, e: ErrorBody) {
    super(e.message);
    this.name = 'ComputerError';
    this.status = status;
    this.code = e.code;
    this.requestId = e.request_id;
    this.details = e.details;
    this.quota = e.quota;
  }
}

/**
 * An error answer's body as the envelope, parsed against its schema; anything else (a proxy's HTML page,
 * a truncated body) becomes an `internal_error` naming the HTTP status instead of a parse exception.
 */
export function errorFromBody(status: number, text: string): ErrorBody {
  try {
    const r = ErrorEnvelope.safeParse(JSON.parse(text));
    if (r.success) return r.data.error;
  } catch {
    // not JSON: fall through
  }
  return { code: 'internal_error', message: `HTTP ${status}`, request_id: '', details: [], quota: null };
}

/**
 * The one error vocabulary of the service. Clients switch on `code`, never on `message`.
 * Every error response, from the control plane or the guest agent, is rendered by `errorBody`.
 */
import type { ZodError } from 'zod';

export const ERROR_STATUS = {
  invalid_request: 400,
  unauthenticated: 401,
  quota_exceeded: 402,
  permission_denied: 403,
  not_found: 404,
  conflict: 409,
  precondition_failed: 412,
  rate_limited: 429,
  internal_error: 500,
  unsupported_operation: 501,
  compute_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** The entitlement keys that can decline a request with `quota_exceeded`. */
export const QUOTA_LIMIT_KEYS = [
  'running_machines',
  'machines',
  'templates',
  'members',
  'concurrent_sessions',
  'snapshots_per_machine',
  'subscription',
] as const;
export type QuotaLimitKey = (typeof QUOTA_LIMIT_KEYS)[number];

export interface FieldError {
  /** Dotted path into the request body (or the query parameter name). */
  field: string;
  message: string;
}

export interface QuotaInfo {
  limit: QuotaLimitKey;
  current: number;
  maximum: number | null;
  plan_id: string;
  upgrade_url: string | null;
}

export interface ErrorEnvelope {
  error: {
    code: ErrorCode;
    message: string;
    request_id: string;
    details: FieldError[];
    quota: QuotaInfo | null;
  };
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: FieldError[];
  readonly quota: QuotaInfo | null;
  /** Extra response headers (e.g. Retry-After); never secrets. */
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: FieldError[]; quota?: QuotaInfo | null; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = opts.details ?? [];
    this.quota = opts.quota ?? null;
    this.headers = opts.headers ?? {};
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** The Retry-After header for a wait of `seconds` (each program names its delays by reason in its `errors.ts`). */
export function retryAfterHeader(seconds: number): Record<string, string> {
  return { 'retry-after': String(seconds) };
}

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}

export function statusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

export function errorBody(err: AppError, requestId: string): ErrorEnvelope {
  return {
    error: {
      code: err.code,
      message: err.message,
      request_id: requestId,
      details: err.details,
      quota: err.quota,
    },
  };
}

/** zod issues → FieldError[] with dotted paths (array indexes as numbers: `command.0`). */
export function zodDetails(error: ZodError, prefix = '', what = 'request body'): FieldError[] {
  return error.issues.flatMap((issue) => {
    const path = issue.path.map(String).join('.');
    // The docs promise a query parameter's name: an unknown one is named, not reported as the whole body.
    if (what === 'query' && issue.code === 'unrecognized_keys' && !path) {
      return issue.keys.map((k) => ({ field: prefix ? `${prefix}.${k}` : k, message: 'unknown query parameter' }));
    }
    const field = prefix ? (path ? `${prefix}.${path}` : prefix) : path || '(body)';
    return [{ field, message: issue.message }];
  });
}

export function invalid(message: string, details: FieldError[] = []): AppError {
  return new AppError('invalid_request', message, { details });
}

/** Parse `input` with `schema`, or throw `invalid_request` carrying the field paths. */
export function parseOrThrow<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: ZodError } },
  input: unknown,
  what = 'request body',
  prefix = '',
): T {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const details = zodDetails(r.error, prefix, what);
  throw invalid(`Invalid ${what}: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`, details);
}

/** Structural check for an envelope received over the wire (agent → control plane). */
export function isErrorEnvelope(v: unknown): v is ErrorEnvelope {
  if (!v || typeof v !== 'object') return false;
  const e = (v as { error?: unknown }).error;
  return !!e && typeof e === 'object' && typeof (e as { code?: unknown }).code === 'string' &&
    (ERROR_CODES as string[]).includes((e as { code: string }).code);
}

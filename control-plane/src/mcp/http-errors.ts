/**
 * The HTTP refusals of /v1/mcp in the spec's error envelope (docs/mcp.md, "Errors"). MCP's own JSON-RPC
 * answers (a request's result or error, HTTP 200) pass untouched; what the transport refuses at the HTTP level
 * (wrong Accept or Content-Type, unparsable JSON, a missing session header, a body too large…) it answers with
 * a JSON-RPC error object and a 4xx/5xx status, and those become the envelope every other /v1 error uses.
 */
import { AppError, errorBody, type ErrorCode, type ErrorEnvelope } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';

/** The transport's status → the envelope's code (and so the spec's status: 406, 413 and 415 answer 400). */
const CODE_OF_STATUS: Readonly<Record<number, ErrorCode>> = {
  400: 'invalid_request',
  403: 'permission_denied',
  404: 'not_found',
  406: 'invalid_request',
  409: 'conflict',
  413: 'invalid_request',
  415: 'invalid_request',
};

/** Longest transport message carried over (they are short fixed texts; one echoes the protocol-version header). */
const MAX_MESSAGE = 300;

/**
 * The transport's answer as it stands when it is not a refusal; a refusal as the AppError to throw (the app's
 * error handler renders it). Only the JSON-RPC error's message is kept, never its `data`.
 */
export async function refusalOf(res: Response): Promise<AppError | null> {
  if (res.status < 400) return null;
  let message = '';
  try {
    const body: unknown = await res.json();
    const m = typeof body === 'object' && body !== null && 'error' in body ? (body.error as { message?: unknown } | null)?.message : undefined;
    if (typeof m === 'string') message = m.replace(/[\u0000-\u001f\u007f]/g, ' ').slice(0, MAX_MESSAGE);
  } catch {
    // Not JSON: the status alone says what happened.
  }
  const code = CODE_OF_STATUS[res.status] ?? 'internal_error';
  return ERRORS.mcpTransportRefused(code, message, res.status);
}

/**
 * GET /v1/mcp: no server-initiated stream. The status stays 405, the one MCP's streamable HTTP transport names
 * for this (its clients treat it as "no stream" and carry on); the body is the envelope.
 */
export function noStreamBody(requestId: string): ErrorEnvelope {
  return errorBody(ERRORS.mcpNoServerStream(), requestId);
}

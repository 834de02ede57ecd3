/**
 * The body limit of every request (app.ts): machine routes carry file contents, exec stdin and typed text; everything
 * else is small. Over the limit: the `invalid_request` envelope, before any handler reads a byte.
 *
 * Decided from the request line and headers where they decide it, so that the app's Request is not built for it:
 * @hono/node-server hands the app a lightweight Request that reads the socket directly unless something asks for
 * `.body`, and building the full one costs a few hundred microseconds of a loaded host's CPU per request (measured
 * on the forwarded path, docs/cluster.md "Measured"). The rule is hono's `bodyLimit`, whose result it keeps:
 *
 * | request                                         | decided                                             |
 * |-------------------------------------------------|-----------------------------------------------------|
 * | GET or HEAD                                     | no body (neither a fetch Request nor node-server's has one): served |
 * | Content-Length, no Transfer-Encoding            | the declared length against the limit               |
 * | anything else (chunked, or no length stated)    | hono's `bodyLimit`: the body counted as it is read  |
 */
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { MAX_MACHINE_BODY_BYTES, MAX_WRITE_BODY_BYTES } from '../../../../shared/schemas/files.js';
import type { CpEnv } from '../../context.js';
import { ERRORS } from '../../errors.js';

/** Control-plane JSON bodies are small; nothing in this API needs more. */
export const MAX_BODY_BYTES = 256 * 1024;

/**
 * The most bytes a request to `path` with `method` may carry. `machineSized`: paths outside /v1/machines/{id}/ that
 * carry what a machine route does (the MCP endpoint's tool calls: app.ts names it, so this file stays below mcp/).
 */
export function bodyLimitOf(method: string, path: string, machineSized: readonly string[] = []): number {
  if (/^\/v1\/machines\/[^/]+\/files\/content$/.test(path) && method === 'PUT') return MAX_WRITE_BODY_BYTES;
  return /^\/v1\/machines\/[^/]+\//.test(path) || machineSized.includes(path) ? MAX_MACHINE_BODY_BYTES : MAX_BODY_BYTES;
}

export const limitBodies = (machineSized: readonly string[]): MiddlewareHandler<CpEnv> => async (c, next) => {
  const method = c.req.method;
  if (method === 'GET' || method === 'HEAD') return next();
  const limit = bodyLimitOf(method, c.req.path, machineSized);
  const length = c.req.header('content-length');
  if (length !== undefined && c.req.header('transfer-encoding') === undefined) {
    if (parseInt(length || '0', 10) > limit) throw ERRORS.bodyOverLimit(limit);
    return next();
  }
  return bodyLimit({
    maxSize: limit,
    onError: () => {
      throw ERRORS.bodyOverLimit(limit);
    },
  })(c, next);
};

import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { AppError } from '../../../shared/errors.js';

/**
 * Every request must carry the machine's bearer token. Digests are compared so that the comparison
 * takes the same time whatever the token's length or content.
 */
export function bearerAuth(token: string): MiddlewareHandler {
  if (token.length < 16) throw new Error('agent token is too short (need at least 16 characters)');
  const expected = createHash('sha256').update(token, 'utf8').digest();
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const m = /^Bearer (.+)$/.exec(header);
    const given = createHash('sha256').update(m ? m[1]! : '', 'utf8').digest();
    if (!m || !timingSafeEqual(given, expected)) {
      throw new AppError('unauthenticated', 'Missing or invalid agent token.');
    }
    await next();
  };
}

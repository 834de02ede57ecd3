import type { Handler, MiddlewareHandler } from 'hono';
import { EnrollRequest } from '../../../shared/agent-protocol.js';
import type { Enrollment } from '../enrollment.js';
import { ERRORS } from '../errors.js';

/** An enrollment body is one short key: anything longer is refused unread. */
const MAX_ENROLL_BODY_BYTES = 1024;

function bearerOf(header: string | undefined): string | null {
  const m = /^Bearer (.+)$/.exec(header ?? '');
  return m ? m[1]! : null;
}

/**
 * `POST /auth/enroll`: install the control plane's key (enrollment.ts says who may). Registered ahead of
 * the gate below, so it is the one route served without the key.
 */
export function enrollHandler(enrollment: Enrollment): Handler {
  return async (c) => {
    const text = await readBounded(c.req.raw);
    let key: string;
    try {
      key = EnrollRequest.parse(JSON.parse(text)).key;
    } catch {
      throw ERRORS.badEnrollBody();
    }
    if (!enrollment.enroll(bearerOf(c.req.header('authorization')), key)) throw ERRORS.enrollmentRefused();
    return c.body(null, 204);
  };
}

/** The agent's gate: every other route requires the enrolled key; before the first enrollment nothing is served. */
export function requireKey(enrollment: Enrollment): MiddlewareHandler {
  return async (c, next) => {
    if (!enrollment.authorized(bearerOf(c.req.header('authorization')))) {
      throw ERRORS.keyRefused(enrollment.enrolled);
    }
    await next();
  };
}

async function readBounded(req: Request): Promise<string> {
  if (!req.body) return '';
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_ENROLL_BODY_BYTES) {
      await reader.cancel().catch(() => {});
      throw ERRORS.enrollBodyTooLarge(MAX_ENROLL_BODY_BYTES);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

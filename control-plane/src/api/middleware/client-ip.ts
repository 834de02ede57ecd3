import type { Context } from 'hono';
import type { CpEnv } from '../../context.js';

/**
 * The caller's address, for per-IP rate limits. From the socket; X-Forwarded-For only when the
 * deployment says a proxy is in front (then the right-most entry, the one that proxy appended).
 */
export function clientIp(c: Context<CpEnv>, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = c.req.header('x-forwarded-for');
    const last = xff?.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last) return last;
  }
  return c.env?.clientIp ?? c.env?.incoming?.socket?.remoteAddress ?? 'unknown';
}

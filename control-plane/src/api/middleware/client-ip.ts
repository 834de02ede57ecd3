import type { Context } from 'hono';
import type { CpEnv } from '../../context.js';

/**
 * The caller's address, for per-IP rate limits. From the socket; X-Forwarded-For only when the
 * deployment says a proxy is in front (then the right-most entry, the one that proxy appended).
 */
export function clientIpFrom(forwardedFor: string | undefined, socketAddress: string | undefined, trustProxy: boolean): string {
  if (trustProxy) {
    const last = forwardedFor?.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last) return last;
  }
  return socketAddress ?? 'unknown';
}

/** `clientIpFrom` for a request the app serves (one forwarded here carries its caller's address in the bindings). */
export function clientIp(c: Context<CpEnv>, trustProxy: boolean): string {
  return clientIpFrom(c.req.header('x-forwarded-for'), c.env?.clientIp ?? c.env?.incoming?.socket?.remoteAddress, trustProxy);
}

/**
 * The caller as the arriving process sees it, for the principal assertion (assertion.ts `client`): its address
 * (rate limits, the guest's X-Forwarded-For), the public scheme and the Host it asked for. The owner reads these
 * from the signed assertion, never from headers (the forwarder drops every X-Forwarded-* a caller sent).
 */
import type { IncomingMessage } from 'node:http';
import { AssertedClient } from './assertion.js';

/** How a process reads its callers: whether a proxy it trusts is in front (TRUST_PROXY), and its public scheme. */
export interface CallerRule {
  trustProxy: boolean;
  proto: 'http' | 'https';
}

/**
 * The caller's address: the socket's, or X-Forwarded-For's right-most entry (the one the trusted proxy appended)
 * when the deployment says a proxy is in front. The same rule as the API's rate limits (api/middleware/client-ip.ts).
 */
export function callerAddress(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.headers['x-forwarded-for'];
    const last = (Array.isArray(xff) ? xff.join(',') : xff)?.split(',').map((s) => s.trim()).filter(Boolean).pop();
    if (last) return last;
  }
  return req.socket.remoteAddress ?? 'unknown';
}

/**
 * The assertion's `client` for this request, or null when what the caller sent cannot be asserted (a Host that is
 * not a host name, a forwarded address longer than any address): the arriving process refuses that itself
 * (ERRORS.callerNotForwardable), so the owner never sees an assertion it would reject.
 */
export function callerOf(req: IncomingMessage, rule: CallerRule): AssertedClient | null {
  const c = AssertedClient.safeParse({ ip: callerAddress(req, rule.trustProxy), proto: rule.proto, host: req.headers.host });
  return c.success ? c.data : null;
}

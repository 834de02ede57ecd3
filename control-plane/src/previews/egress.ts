/**
 * Egress of a preview response's head (docs/usage-and-billing.md, "What egress counts"). The proxy counts
 * the bodies it relays as they stream; this counts the head that precedes them: the status line and every
 * header line exactly as Node serialised them onto the client's connection (the app's headers after
 * domain/preview-headers.ts, plus Date, Connection, Keep-Alive, Transfer-Encoding), and the blank line.
 *
 * previews/proxy.ts calls it once per relayed response, right after `res.flushHeaders()`:
 *
 *   countResponseHead(deps.egress, machineId, res);
 */
import type { ServerResponse } from 'node:http';
import type { EgressMeter } from '../gateway/deps.js';

/**
 * Bytes of the head `res` has sent, or 0 before it is sent. Node keeps the serialised head as the
 * response's `_header` string; `flushHeaders()` writes it UTF-8 encoded (what the proxy does, and what
 * the test compares with the connection's bytesWritten).
 */
export function sentHeadBytes(res: ServerResponse): number {
  if (!res.headersSent) return 0;
  const head: unknown = Reflect.get(res, '_header');
  return typeof head === 'string' ? Buffer.byteLength(head) : 0;
}

/** Counts the head `res` has sent as the machine's egress. */
export function countResponseHead(egress: EgressMeter, machineId: string, res: ServerResponse): void {
  egress.add(machineId, sentHeadBytes(res));
}

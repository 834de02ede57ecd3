/**
 * One small request through the channel whose answer is read whole before the caller sees any of it: a create sent to
 * the host placement chose (api/middleware/owner-route.ts), so the arriving process can try the next ranked host when
 * this one refused or could not be reached. Bounded both ways: the body is the caller's, already read and limited;
 * the answer is held up to `limit` bytes (a create's answer is one machine, a few KB).
 *
 * Each call opens its own connection, never a pooled one: a request that failed before its connection opened never
 * reached the owner, so trying another host is safe; a failure after it opened may have been acted on (`lost`).
 */
import type { Dial, DialedRequest, ForwardCall } from './call.js';
import { responseHeadersForCaller } from './headers.js';

export type BufferedAnswer =
  /** The owner's answer: its status, its headers for the caller (hop-by-hop ones removed), its whole body. */
  | { kind: 'answer'; status: number; headers: string[]; body: Buffer }
  /** The connection never opened: nothing reached the owner. */
  | { kind: 'unreached'; error: unknown }
  /** The connection opened, then failed (or the answer outgrew the bound): the owner may have acted. */
  | { kind: 'lost'; error: unknown };

export function forwardBuffered(dial: Dial, req: DialedRequest, call: ForwardCall, body: Buffer, limit: number): Promise<BufferedAnswer> {
  return new Promise((resolve) => {
    let connected = false;
    let up: ReturnType<Dial>;
    try {
      up = dial(req, call, false, true);
    } catch (error) {
      resolve({ kind: 'unreached', error });
      return;
    }
    up.once('socket', (s) => {
      if (!s.connecting) connected = true;
      else s.once('connect', () => (connected = true));
    });
    up.on('error', (error) => resolve(connected ? { kind: 'lost', error } : { kind: 'unreached', error }));
    up.on('response', (answer) => {
      const chunks: Buffer[] = [];
      let size = 0;
      answer.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          up.destroy(new Error(`the owner's answer is over ${limit} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      answer.on('error', (error) => resolve({ kind: 'lost', error }));
      answer.on('end', () => resolve({ kind: 'answer', status: answer.statusCode ?? 502, headers: responseHeadersForCaller(answer.rawHeaders), body: Buffer.concat(chunks) }));
    });
    up.end(body);
  });
}

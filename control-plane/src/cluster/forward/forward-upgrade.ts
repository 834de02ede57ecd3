/**
 * One upgrade through the channel (a gateway WebSocket or a preview's upgrade): the owner's 101 is relayed to the
 * caller and the two sockets are piped both ways, raw, with each side's backpressure reaching the other; when
 * either side closes or fails, both are destroyed at once (a dead owner closes the caller's socket, a caller gone
 * frees the owner's). An owner that answers something other than 101 (a refusal in the envelope) has that answer
 * relayed and the connection closed; one that cannot be reached is a 503 envelope on the raw socket.
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import { ERRORS } from '../../errors.js';
import { refuseSocket } from './envelope.js';
import type { Dial, ForwardCall } from './call.js';
import { responseHeadersForCaller } from './headers.js';

/** A status line and flat header list as an HTTP/1.1 response head. */
function head(status: number, raw: readonly string[]): string {
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}`];
  for (let i = 0; i + 1 < raw.length; i += 2) lines.push(`${raw[i]}: ${raw[i + 1]}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Pipes `a` and `b` both ways until either closes; then both are destroyed and `ended` is called once. */
function join(a: Duplex, b: Duplex, open: Set<Duplex>, ended: () => void): void {
  for (const s of [a, b]) {
    if (s instanceof net.Socket) {
      s.setNoDelay(true);
      s.setTimeout(0);
    }
  }
  open.add(a);
  const teardown = () => {
    if (!open.delete(a)) return;
    a.destroy();
    b.destroy();
    ended();
  };
  a.once('close', teardown);
  b.once('close', teardown);
  b.on('error', () => {});
  a.pipe(b);
  b.pipe(a);
}

export function forwardUpgrade(
  dial: Dial,
  req: IncomingMessage,
  socket: Duplex,
  early: Buffer,
  call: ForwardCall,
  o: { open: Set<Duplex>; failed: (e: unknown) => void; ended: () => void },
): void {
  socket.on('error', () => {});
  let up: ReturnType<Dial>;
  try {
    up = dial(req, call, true);
  } catch (e) {
    o.failed(e);
    refuseSocket(socket, ERRORS.machineOwnerUnreachable(), call.assertion.request_id);
    return;
  }
  const abandon = () => up.destroy();
  socket.once('close', abandon);
  up.on('upgrade', (answer, ownerSocket, ownerEarly) => {
    socket.off('close', abandon);
    if (socket.destroyed) {
      ownerSocket.destroy();
      return;
    }
    socket.write(head(101, responseHeadersForCaller(answer.rawHeaders, true)));
    if (ownerEarly.length) socket.write(ownerEarly);
    if (early.length) ownerSocket.write(early);
    join(socket, ownerSocket, o.open, o.ended);
  });
  up.on('response', (answer) => {
    socket.write(head(answer.statusCode ?? 502, [...responseHeadersForCaller(answer.rawHeaders), 'Connection', 'close']));
    answer.pipe(socket);
  });
  up.on('error', (e) => {
    o.failed(e);
    refuseSocket(socket, ERRORS.machineOwnerUnreachable(), call.assertion.request_id);
  });
  up.end();
}

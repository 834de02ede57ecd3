/**
 * Byte-level ends for preview tests. `rawGuest`: a TCP listener standing in for the app in the machine
 * (reached through the agent's real TCP stream route) that records every byte of each request it receives
 * and answers with what the test gives. `rawExchange`: a client sending exact bytes to a preview host and
 * reading the whole answer (it sends `Connection: close`, so the control plane closes after it).
 */
import net from 'node:net';

export interface RawGuest {
  port: number;
  /** Each connection's bytes, once its request was complete (head, then the body its framing says). */
  received: Buffer[];
  close(): Promise<void>;
}

/** Where the request in `buf` ends, or -1 while incomplete (Content-Length, chunked to `0\r\n\r\n`, or none). */
function requestEnd(buf: Buffer): number {
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return -1;
  const head = buf.subarray(0, headEnd).toString('latin1');
  const bodyStart = headEnd + 4;
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    const end = buf.indexOf('\r\n0\r\n\r\n', bodyStart - 2);
    return end < 0 ? -1 : end + 7;
  }
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  const total = bodyStart + (cl ? Number(cl[1]) : 0);
  return buf.length >= total ? total : -1;
}

/** `answer(request)`: the raw bytes to send back once the request is complete (null: say nothing, keep open). */
export async function rawGuest(answer: (request: Buffer) => Buffer | string | null): Promise<RawGuest> {
  const received: Buffer[] = [];
  const open = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    open.add(sock);
    sock.on('close', () => open.delete(sock));
    sock.on('error', () => {});
    let buf = Buffer.alloc(0);
    let done = false;
    sock.on('data', (d: Buffer) => {
      if (done) return;
      buf = Buffer.concat([buf, d]);
      const end = requestEnd(buf);
      if (end < 0) return;
      done = true;
      received.push(buf);
      const a = answer(buf.subarray(0, end));
      if (a !== null) sock.end(a);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    received,
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Sends `request` (as given, in `parts` written one after another) to 127.0.0.1:port and resolves with everything the server sent. */
export function rawExchange(port: number, parts: Array<Buffer | string>): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', reject);
    sock.on('close', () => resolve(Buffer.concat(chunks)));
    sock.once('connect', () => {
      const next = (i: number): void => {
        if (i >= parts.length) return;
        sock.write(parts[i]!, () => setImmediate(() => next(i + 1)));
      };
      next(0);
    });
  });
}

/** A strict decoder of a chunked body (the test's own, not the proxy's): the payload, or throws. */
export function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) throw new Error('chunk size line');
    const size = Number.parseInt(body.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) throw new Error('chunk size');
    at = eol + 2;
    if (size === 0) {
      if (body.subarray(at).toString('latin1') !== '\r\n') throw new Error('chunked end');
      return Buffer.concat(out);
    }
    out.push(body.subarray(at, at + size));
    at += size;
    if (body.subarray(at, at + 2).toString('latin1') !== '\r\n') throw new Error('chunk end');
    at += 2;
  }
}

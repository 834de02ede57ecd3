import fs from 'node:fs';
import type http2 from 'node:http2';
import { Duplex } from 'node:stream';
import type { LogSink } from '../http/log.js';

/**
 * A byte channel with virtio-serial semantics (measured on this host's QEMU):
 * - one byte stream; `read` resolves 0 while the host end is disconnected (immediately, not blocking),
 * - the same fd works again once the host reconnects, without reopening,
 * - bytes written while the host is disconnected are dropped by the guest kernel.
 */
export interface ByteChannel {
  read(buf: Buffer): Promise<number>;
  write(buf: Buffer): Promise<void>;
  close(): void;
}

export function openVirtioPort(path: string): ByteChannel {
  const fd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_NOCTTY);
  return {
    read: (buf) =>
      new Promise((resolve, reject) =>
        fs.read(fd, buf, 0, buf.length, null, (err, n) => {
          // EAGAIN can show up on a port opened by a previous non-blocking opener; treat as "no data yet".
          if (err && (err.code === 'EAGAIN' || err.code === 'EINTR')) resolve(0);
          else if (err) reject(err);
          else resolve(n);
        }),
      ),
    write: async (buf) => {
      let off = 0;
      while (off < buf.length) {
        const n = await new Promise<number>((resolve, reject) =>
          fs.write(fd, buf, off, buf.length - off, null, (err, w) => (err ? reject(err) : resolve(w))),
        );
        off += n;
      }
    },
    close: () => fs.closeSync(fd),
  };
}

/**
 * Bridge a ByteChannel into the HTTP/2 server as a sequence of connections: one per host connection.
 *
 * A host disconnect shows as read()=0: the current connection is torn down (without writing anything,
 * since the kernel would drop it or, worse, a reconnected host would read stale frames). The first
 * bytes after a reconnect are handed to a fresh connection, so the request that reconnected is not
 * lost. A host close wakes a blocked read() with 0 at once, so a reconnect is always seen as one.
 */
export function serveByteChannel(
  server: http2.Http2Server,
  ch: ByteChannel,
  opts: { log: LogSink; idlePollMs?: number; bufferSize?: number } = { log: () => {} },
): { close(): Promise<void> } {
  const idle = opts.idlePollMs ?? 20;
  const buf = Buffer.allocUnsafe(opts.bufferSize ?? 256 * 1024);
  let conn: Duplex | null = null;
  let closed = false;
  let connections = 0;

  const newConn = (): Duplex => {
    const d = new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        if (d !== conn) return cb(); // a torn-down connection's late writes go nowhere
        ch.write(chunk).then(() => cb(), (e: Error) => cb(e));
      },
      final(cb) {
        cb();
      },
    });
    d.on('error', () => {});
    connections++;
    opts.log({ event: 'channel_connected', connections });
    server.emit('connection', d);
    return d;
  };

  const drop = () => {
    if (!conn) return;
    const c = conn;
    conn = null;
    c.push(null);
    c.destroy();
    opts.log({ event: 'channel_disconnected' });
  };

  const loop = (async () => {
    while (!closed) {
      let n: number;
      try {
        n = await ch.read(buf);
      } catch {
        if (closed) break;
        drop();
        await new Promise((r) => setTimeout(r, idle));
        continue;
      }
      if (n === 0) {
        drop();
        await new Promise((r) => setTimeout(r, idle));
        continue;
      }
      const chunk = Buffer.from(buf.subarray(0, n));
      if (!conn) conn = newConn();
      conn.push(chunk);
    }
  })();

  return {
    async close() {
      closed = true;
      drop();
      ch.close();
      await Promise.race([loop, new Promise((r) => setTimeout(r, 100))]);
    },
  };
}

/**
 * Reading a terminal's last output before its stream is closed.
 *
 * node-pty reads the pty master through a libuv TTY stream, and two things close that stream while
 * the kernel still holds output the program wrote before it exited:
 *
 * 1. libuv treats POLLHUP after a short read as end of file (right for sockets, where a short read
 *    means the buffer is empty). A pty master reports POLLHUP as soon as the last slave descriptor
 *    closes, yet n_tty hands out at most 4095 bytes per read, so a read is "short" while kilobytes
 *    are still queued: `seq 1 20000` lost 1-15 KB of its 129 KB in most runs.
 * 2. node-pty destroys the stream 200 ms after the child exits in case the master never reports an
 *    end (a macOS quirk). A stream paused for backpressure (a slow client) has not read the tail yet.
 *
 * Both go through the stream's `destroy()`, so that is where the rest is read: synchronously from
 * the (non-blocking) master descriptor until the kernel says EIO (the slave side is gone and nothing
 * is left) or EAGAIN (a descendant still holds the slave open and has written nothing more; what it
 * writes later is lost as before), first emptying what the paused stream already buffered. The fd is
 * still open then: the stream closes it in its own `_destroy`.
 */
import fs from 'node:fs';
import net from 'node:net';

/** Bound on one drain: a descendant writing continuously must not keep the agent in a read loop. */
export const MAX_DRAIN_BYTES = 4 * 1024 * 1024;

/**
 * node-pty's IPty does not expose its stream or descriptor; both are fields of its UnixTerminal
 * (`_socket`, a tty.ReadStream, and `_fd`). Refuse to start rather than silently lose output if a
 * node-pty upgrade renamed them.
 */
export function drainBeforeClose(term: object, deliver: (chunk: Buffer) => void): void {
  const sock: unknown = Reflect.get(term, '_socket');
  const fd: unknown = Reflect.get(term, '_fd');
  if (!(sock instanceof net.Socket) || typeof fd !== 'number') {
    throw new Error('node-pty internals changed: no _socket/_fd on the terminal');
  }
  const destroy = sock.destroy;
  let drained = false;
  sock.destroy = (error?: Error) => {
    if (!drained && !sock.destroyed) {
      drained = true;
      // Chunks the stream read while paused: read() emits them as 'data', which node-pty forwards.
      while (sock.readableLength > 0 && sock.read() !== null) {
        /* emitted */
      }
      readRest(fd, deliver);
    }
    return destroy.call(sock, error);
  };
}

function readRest(fd: number, deliver: (chunk: Buffer) => void): void {
  let total = 0;
  while (total < MAX_DRAIN_BYTES) {
    const buf = Buffer.allocUnsafe(65536);
    let n: number;
    try {
      n = fs.readSync(fd, buf, 0, buf.length, null);
    } catch {
      // EIO: everything is read and the slave is closed. EAGAIN: nothing more for now. EBADF: closed.
      return;
    }
    if (n <= 0) return;
    total += n;
    deliver(buf.subarray(0, n));
  }
}

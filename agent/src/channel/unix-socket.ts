import fs from 'node:fs';
import net from 'node:net';
import type http2 from 'node:http2';

/**
 * Serve the agent on a unix socket (container substrate and tests). The socket is created 0600 so
 * only root (the control plane, through the bind-mounted private directory) can connect.
 */
export async function listenUnix(server: http2.Http2Server, socketPath: string): Promise<net.Server> {
  try {
    fs.unlinkSync(socketPath);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const oldMask = process.umask(0o177);
  const listener = net.createServer((sock) => server.emit('connection', sock));
  try {
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(socketPath, () => resolve());
    });
  } finally {
    process.umask(oldMask);
  }
  fs.chmodSync(socketPath, 0o600);
  return listener;
}

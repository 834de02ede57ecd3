/** Opens `server` on `host:port` (0: a free port); resolves with the port it listens on. */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

export function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** One control plane of the `crosshost` bench (cross-host.ts, and its child cross-host-follower.ts): `serve()` on a free loopback port. */
import net from 'node:net';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import type { Substrate } from '../../control-plane/src/substrate/substrate.js';

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as net.AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });

/** `OWNER_CACHE_MS` from the bench's environment reaches both processes (0: the owner cache off, to compare). */
export async function serveOn(dataDir: string, databaseUrl: string, substrate: Substrate) {
  const cache = process.env.OWNER_CACHE_MS;
  const config = parseConfig({ PORT: String(await freePort()), HOST: '127.0.0.1', DATA_DIR: dataDir, DATABASE_URL: databaseUrl, WARM_POOL_PER_SIZE: '0', ...(cache ? { OWNER_CACHE_MS: cache } : {}) });
  return serve(config, { log: () => {}, services: { substrate, passwordCost: { N: 1024, r: 8, p: 1 } } });
}

/**
 * Entry point: configuration → database → services → app → HTTP server. Nothing else.
 */
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { serve as honoServe } from '@hono/node-server';
import { createApp } from './app.js';
import { parseConfig, type Config } from './config.js';
import { stderrLog, type LogSink } from './log.js';
import { createServices, type ServiceDeps } from './services/index.js';
import { DB_FILENAME, openDb } from './store/db.js';
import { createStore } from './store/store.js';

/** How often the billing provider is asked what is due (trial ends). Reads also ask, per account. */
const BILLING_SYNC_MS = 60_000;

export interface Running {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function serve(config: Config, opts: { log?: LogSink; services?: Partial<ServiceDeps> } = {}): Promise<Running> {
  const log = opts.log ?? stderrLog;
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const db = openDb(path.join(config.dataDir, DB_FILENAME));
  const services = createServices({ ...opts.services, config, store: createStore(db) });
  const app = createApp({ services, log });
  const timer = setInterval(() => {
    try {
      services.billing.provider.syncAll();
    } catch (e) {
      log({ event: 'billing_sync_failed', cause: (e as Error)?.name ?? 'Error' });
    }
  }, BILLING_SYNC_MS);
  timer.unref();

  const server = await new Promise<ReturnType<typeof honoServe>>((resolve) => {
    const s = honoServe({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  log({ event: 'listening', port });
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(timer);
        server.close(() => {
          db.close();
          resolve();
        });
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = parseConfig(process.env);
  const running = await serve(config);
  const stop = () => void running.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

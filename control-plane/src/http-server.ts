/**
 * The one HTTP listener: preview hostnames go to the preview proxy (requests and upgrades), everything
 * else to the API app (and its upgrades to the WebSocket gateway, which leaves preview hosts alone).
 */
import http from 'node:http';
import { getRequestListener } from '@hono/node-server';
import type { PreviewProxy } from './previews/proxy.js';

type Fetch = Parameters<typeof getRequestListener>[0];

export function createHttpServer(fetch: Fetch, previews: PreviewProxy | null, o: { hostname?: string } = {}): http.Server {
  const api = getRequestListener(fetch, { hostname: o.hostname });
  const server = http.createServer((req, res) => {
    if (previews?.owns(req)) previews.handle(req, res);
    else void api(req, res);
  });
  if (previews) {
    server.on('upgrade', (req, socket, head) => {
      if (previews.owns(req)) previews.upgrade(req, socket, head);
    });
  }
  return server;
}

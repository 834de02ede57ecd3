/**
 * The one HTTP listener: preview hostnames go to the preview proxy (requests and upgrades), everything
 * else to the API app (and its upgrades to the WebSocket gateway, which leaves preview hosts alone). With several
 * processes, a machine operation whose driver this process remembers may take the short way in first
 * (api/forward-front.ts); what it leaves, or hands back with the body it read, goes to the app.
 */
import http, { type IncomingMessage } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import type { Front } from './api/forward-front.js';
import type { PreviewProxy } from './previews/proxy.js';

type Fetch = Parameters<typeof getRequestListener>[0];

/** `req` with the body already read from it: @hono/node-server builds the app's body from `rawBody` when set. */
function withRead(req: IncomingMessage, body: Buffer | null): IncomingMessage {
  return body && body.length ? Object.assign(req, { rawBody: body }) : req;
}

export function createHttpServer(fetch: Fetch, previews: PreviewProxy | null, o: { hostname?: string; front?: Front | null } = {}): http.Server {
  const api = getRequestListener(fetch, { hostname: o.hostname });
  const server = http.createServer((req, res) => {
    if (previews?.owns(req)) return previews.handle(req, res);
    const taken = o.front?.(req, res) ?? null;
    if (!taken) return void api(req, res);
    void taken.then((r) => {
      if (r.kind === 'app') void api(withRead(req, r.body), res);
    }, () => res.destroy());
  });
  if (previews) {
    server.on('upgrade', (req, socket, head) => {
      if (previews.owns(req)) previews.upgrade(req, socket, head);
    });
  }
  return server;
}

/**
 * Serves the built dashboard (clients/dashboard → dist/dashboard, docs/dashboard.md) at `/`: the files the
 * build wrote, read once into memory, and index.html for every other GET outside /v1 and /docs, so the
 * single-page app's own paths (/machines/mch_…) survive a reload.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Hono } from 'hono';
import type { CpEnv } from './context.js';
import { ERRORS } from './errors.js';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json; charset=utf-8',
};

/**
 * The page's Content-Security-Policy. Scripts only from our origin (the build emits no inline script), so
 * an injected string can never run; fetches and WebSockets only to our origin; no framing. Styles allow
 * 'unsafe-inline' because xterm.js writes its theme into a <style> element at run time; style injection
 * cannot run code. The WebSocket origin is named as well as 'self' for browsers that do not map 'self'
 * to ws:/wss:.
 */
export function dashboardCsp(publicBaseUrl: string): string {
  const u = new URL(publicBaseUrl);
  const ws = `${u.protocol === 'https:' ? 'wss:' : 'ws:'}//${u.host}`;
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    `connect-src 'self' ${ws}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

interface Asset {
  bytes: Uint8Array<ArrayBuffer>;
  type: string;
}

/** Every file under `dir`, keyed by its URL path (an allow-list: nothing else on disk is reachable). */
function readAssets(dir: string): Map<string, Asset> {
  const out = new Map<string, Asset>();
  const walk = (d: string, prefix: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full, `${prefix}${e.name}/`);
      else if (e.isFile()) {
        out.set(`${prefix}${e.name}`, {
          bytes: new Uint8Array(fs.readFileSync(full)),
          type: TYPES[path.extname(e.name)] ?? 'application/octet-stream',
        });
      }
    }
  };
  walk(dir, '/');
  return out;
}

/** Mounts the dashboard; `dir` must hold a build (index.html). Call after the /v1 routes. */
export function mountDashboard(app: Hono<CpEnv>, dir: string, publicBaseUrl: string): void {
  const assets = readAssets(dir);
  const index = assets.get('/index.html');
  if (!index) throw new Error(`dashboard: no index.html in ${dir} (run npm run build:dashboard)`);
  const csp = dashboardCsp(publicBaseUrl);
  app.get('*', (c) => {
    const p = c.req.path;
    // The API and its reference keep their JSON 404s.
    if (p === '/v1' || p.startsWith('/v1/') || p === '/docs' || p.startsWith('/docs/')) {
      throw ERRORS.noSuchRoute();
    }
    const file = assets.get(p);
    // A missing hashed asset is a 404, not the page (a stale tab must not parse HTML as a script).
    if (!file && (p.startsWith('/assets/') || path.extname(p) !== '')) throw ERRORS.noSuchRoute();
    const a = file ?? index;
    c.header('content-type', a.type);
    c.header('content-security-policy', csp);
    c.header('x-content-type-options', 'nosniff');
    c.header('referrer-policy', 'no-referrer');
    c.header('x-frame-options', 'DENY');
    // Hashed file names never change content; the page itself is revalidated every time.
    c.header('cache-control', p.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
    return c.body(a.bytes);
  });
}

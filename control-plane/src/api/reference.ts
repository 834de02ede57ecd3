/**
 * GET /v1/openapi.json (no credential: the contract is public, like the plan catalog) and the API
 * reference page at /docs, rendered by swagger-ui-dist's static assets served from our own origin.
 * The page runs no inline script and loads nothing from elsewhere, so its CSP can be strict.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Hono } from 'hono';
import type { CpEnv } from '../context.js';
import { buildOpenApi } from './openapi.js';
import type { Op } from './op.js';
import { ERRORS } from '../errors.js';

const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The only swagger-ui-dist files the page needs (an allow-list: nothing else under node_modules is served). */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>computer API reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"><link rel="icon" href="/docs/favicon-32x32.png"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script><script src="/docs/init.js"></script></body></html>`;

const INIT = `window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#swagger-ui', deepLinking: true });\n`;

export function mountReference(app: Hono<CpEnv>, ops: readonly Op[], serverUrl: string): void {
  let doc: string | undefined;
  app.get('/v1/openapi.json', (c) => {
    doc ??= JSON.stringify(buildOpenApi(ops, { serverUrl }));
    c.header('content-type', 'application/json; charset=utf-8');
    c.header('cache-control', 'public, max-age=300');
    return c.body(doc);
  });

  const dist = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const cache = new Map<string, Buffer>();
  const secure = (c: { header(k: string, v: string): void }) => {
    c.header('content-security-policy', DOCS_CSP);
    c.header('x-content-type-options', 'nosniff');
    c.header('referrer-policy', 'no-referrer');
  };
  app.get('/docs', (c) => {
    secure(c);
    return c.html(PAGE);
  });
  app.get('/docs/init.js', (c) => {
    secure(c);
    c.header('content-type', 'text/javascript; charset=utf-8');
    return c.body(INIT);
  });
  app.get('/docs/:asset', (c) => {
    const name = c.req.param('asset');
    const type = ASSETS[name];
    if (!type) throw ERRORS.noSuchRoute();
    let bytes = cache.get(name);
    if (!bytes) cache.set(name, (bytes = fs.readFileSync(path.join(dist, name))));
    secure(c);
    c.header('content-type', type);
    c.header('cache-control', 'public, max-age=86400');
    return c.body(new Uint8Array(bytes));
  });
}

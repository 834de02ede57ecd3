/**
 * Dashboard tests: the dashboard built once per content (clients/dashboard + the lock file) into a cache
 * directory, and the system Chromium driven by playwright-core (no browser download) with the rig's public
 * host (http://cp.test) mapped onto the test server's loopback port, so the page's Origin is the one the
 * control plane recognises. Every page's console errors and page errors are collected.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = path.join(ROOT, 'clients/dashboard');

function hashTree(h: crypto.Hash, dir: string): void {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) hashTree(h, p);
    else if (e.isFile()) h.update(path.relative(ROOT, p)).update('\0').update(fs.readFileSync(p));
  }
}

/** The built dashboard's directory (built now unless this content was built before). */
export async function builtDashboard(): Promise<string> {
  const h = crypto.createHash('sha256');
  hashTree(h, SRC);
  h.update(fs.readFileSync(path.join(ROOT, 'package-lock.json')));
  const dir = path.join(os.tmpdir(), `computer-dashboard-${h.digest('hex').slice(0, 16)}`);
  if (fs.existsSync(path.join(dir, 'index.html'))) return dir;
  const { build } = await import('vite');
  const tmp = `${dir}.tmp-${process.pid}`;
  await build({ configFile: path.join(SRC, 'vite.config.ts'), logLevel: 'warn', build: { outDir: tmp, emptyOutDir: true } });
  // Two test files may build at once: the first rename wins, the other copy is dropped.
  try {
    fs.renameSync(tmp, dir);
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

export interface DashboardBrowser {
  browser: Browser;
  /** A fresh context (own cookies) and page; console errors are recorded into `errors`. */
  page(opts?: { width?: number; height?: number }): Promise<{ context: BrowserContext; page: Page }>;
  errors: string[];
}

/** Chromium with http://cp.test (the rigs' PUBLIC_BASE_URL) resolved to 127.0.0.1:`port`. Closed at teardown. */
export async function dashboardBrowser(t: { teardown(fn: () => Promise<void> | void): void }, port: number): Promise<DashboardBrowser> {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP cp.test:80 127.0.0.1:${port}`],
  });
  t.teardown(() => browser.close());
  // Every failed request is an error here: the page asks the desktop for nothing before it is up (machine.ready).
  const errors: string[] = [];
  return {
    browser,
    errors,
    async page(o = {}) {
      const context = await browser.newContext({ viewport: { width: o.width ?? 1280, height: o.height ?? 800 } });
      const page = await context.newPage();
      page.on('console', (m) => {
        if (m.type() !== 'error') return;
        // Signed out, the page's first question (who am I?) is answered 401: that is how it knows.
        if (/status of 401/.test(m.text()) && m.location().url.endsWith('/v1/auth/me')) return;
        errors.push(`console: ${m.text()} (${m.location().url})`);
      });
      page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
      return { context, page };
    },
  };
}

/** True when the page is wider than its viewport (a horizontal scrollbar). Page code is a string: no DOM types here. */
export function overflowsX(page: Page): Promise<boolean> {
  return page.evaluate<boolean>('document.documentElement.scrollWidth > document.documentElement.clientWidth + 1');
}

/** Visible buttons, links, inputs and selects without an accessible name (their outer HTML). */
export function unnamedControls(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`(() => {
    const out = [];
    for (const el of document.querySelectorAll('button, a[href], input, select, textarea, [role=button]')) {
      if (el.getClientRects().length === 0) continue;
      const labelled = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || el.getAttribute('title');
      const byLabel = el.labels && [...el.labels].some((l) => l.textContent.trim());
      const text = el.tagName !== 'INPUT' && el.tagName !== 'SELECT' && el.textContent.trim();
      if (!labelled && !byLabel && !text) out.push(el.outerHTML.slice(0, 120));
    }
    return out;
  })()`);
}

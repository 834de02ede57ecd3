/**
 * A real Chromium showing one test page full-screen on a test display, read through the DevTools
 * protocol (the page records DOM events; the test evaluates expressions in it). Started by the test
 * itself (root, own throwaway profile, --no-sandbox), killed with every process of its profile at
 * teardown.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { WebSocket } from 'ws';

export interface ChromiumPage {
  /** Evaluate an expression in the page; its value comes back as JSON. */
  eval<T = unknown>(expression: string): Promise<T>;
  /** The page's URL as loaded (a reload or navigation is detected by comparing with it). */
  url: string;
}

/** Pids of live (non-zombie) processes whose command line contains `needle`. */
export function pidsWithArg(needle: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(needle) && !/\) [ZX] /.test(fs.readFileSync(`/proc/${d}/stat`, 'utf8'));
      } catch {
        return false;
      }
    })
    .map(Number);
}

async function until<T>(fn: () => T | null | undefined | Promise<T | null | undefined>, what: string, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch {
      /* not yet */
    }
    if (Date.now() > end) throw new Error(`chromium-page: gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Open `html` (a whole document; it should set `window.ready = true` once its listeners are in place)
 * in a kiosk window covering the display, so page coordinates are screen coordinates.
 */
export async function openChromiumPage(t: Test, display: string, html: string): Promise<ChromiumPage> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chromium-page-'));
  const profile = path.join(dir, 'profile');
  const file = path.join(dir, 'page.html');
  fs.writeFileSync(file, html);
  const url = `file://${file}`;
  const proc = spawn(
    'chromium',
    [
      '--no-sandbox',
      `--user-data-dir=${profile}`,
      '--remote-debugging-port=0',
      '--no-first-run',
      '--no-default-browser-check',
      '--password-store=basic',
      '--force-device-scale-factor=1',
      '--disable-gpu',
      '--kiosk',
      url,
    ],
    { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, DISPLAY: display }, stdio: 'ignore', detached: true },
  );
  proc.unref();
  let ws: WebSocket | null = null;
  t.teardown(async () => {
    ws?.close();
    // Chromium's zygote and renderers leave the launcher's process group: find them by profile.
    for (const pid of pidsWithArg(`--user-data-dir=${profile}`)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await until(() => pidsWithArg(`--user-data-dir=${profile}`).length === 0, 'chromium to exit', 10_000).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const port = await until(() => {
    const f = path.join(profile, 'DevToolsActivePort');
    return fs.existsSync(f) ? Number(fs.readFileSync(f, 'utf8').split('\n')[0]) : null;
  }, 'DevToolsActivePort');
  const target = await until(async () => {
    const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ type: string; url: string; webSocketDebuggerUrl: string }>;
    return list.find((x) => x.type === 'page' && x.url === url);
  }, 'the page target');
  const sock = new WebSocket(target.webSocketDebuggerUrl, { perMessageDeflate: false });
  ws = sock;
  await new Promise<void>((resolve, reject) => {
    sock.once('open', () => resolve());
    sock.once('error', reject);
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  sock.on('message', (data) => {
    const m = JSON.parse(String(data)) as { id?: number; result?: { result?: { value?: unknown }; exceptionDetails?: unknown }; error?: { message: string } };
    if (m.id === undefined) return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error.message));
    else if (m.result?.exceptionDetails) p.reject(new Error('page exception: ' + JSON.stringify(m.result.exceptionDetails).slice(0, 300)));
    else p.resolve(m.result?.result?.value);
  });
  const page: ChromiumPage = {
    url,
    eval<T>(expression: string): Promise<T> {
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: (v) => resolve(v as T), reject });
        sock.send(JSON.stringify({ id, method: 'Runtime.evaluate', params: { expression, returnByValue: true, awaitPromise: true } }));
      });
    },
  };
  await until(() => page.eval<boolean>('window.ready === true && document.hasFocus()'), 'the page to be ready and focused');
  return page;
}

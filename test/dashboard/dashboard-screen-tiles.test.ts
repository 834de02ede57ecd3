/**
 * The dashboard's live view on the `tiles` screen encoding, in the system Chromium against the real control
 * plane and gateway and the real agent on a real Xvfb (test/helpers/gateway-rig.ts): the canvas shows what
 * the machine shows — a known pattern (a blue root, a red window, its removal), then an xterm scrolling text
 * (deltas with scroll copies) compared with the framebuffer pixel by pixel — while the socket carries a key
 * frame first and deltas after.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { decodeScreenTilesMessage } from '../../shared/screen-tiles.js';
import { builtDashboard, dashboardBrowser } from '../helpers/dashboard.js';
import { xrun } from '../helpers/desktop-agent.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';

const W = 1280;
const H = 800;
/** Every 8th pixel of each 8th row: 160x100 samples. */
const STEP = 8;

t.test('the live view paints tiles: the canvas shows what the machine shows', { timeout: 240_000 }, async (t) => {
  const dashboardDir = await builtDashboard();
  const g = await startGatewayRig(t, { xvfb: { width: W, height: H }, dashboardDir });
  await g.desktopUp();
  const children: ChildProcess[] = [];
  t.teardown(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
  const x = (cmd: string, args: string[]) => {
    const c = spawn(cmd, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DISPLAY: g.xvfb.display }, stdio: 'ignore' });
    children.push(c);
    return c;
  };
  await xrun(g.xvfb.display, 'xsetroot', ['-solid', '#0000ff']);

  const b = await dashboardBrowser(t, g.port);
  const { context, page } = await b.page({ width: 1400, height: 1000 });
  page.setDefaultTimeout(60_000);
  await context.addCookies([{ name: 'computer_session', value: g.tenant.cookie.slice('computer_session='.length), domain: 'cp.test', path: '/' }]);
  // What the screen socket carries, decoded here as the page does.
  const received: Array<{ type: string; copy: boolean }> = [];
  page.on('websocket', (ws) => {
    if (!ws.url().includes('/screen?')) return;
    t.match(ws.url(), /encoding=tiles/, 'the live view asks for tiles');
    ws.on('framereceived', (f) => {
      if (typeof f.payload === 'string') return;
      const m = decodeScreenTilesMessage(f.payload);
      received.push({ type: m.header.type, copy: m.header.type === 'tiles' && m.header.copy !== null });
    });
  });
  await page.goto(`http://cp.test/machines/${g.machineId}`);
  const canvas = page.getByRole('img', { name: 'Screen of gw' });
  await canvas.waitFor();

  await waitPixel(page, 640, 400, [0, 0, 255], 'the blue root');
  // A red window (no window manager: exactly where asked, no decorations).
  const red = x('xterm', ['-geometry', '20x5+300+200', '-bw', '0', '-bg', '#ff0000', '-fg', '#ff0000', '-cr', '#ff0000', '-e', 'sleep 600']);
  await waitPixel(page, 310, 210, [255, 0, 0], 'the red window');
  t.same(await pixel(page, 100, 100), near(await pixel(page, 100, 100), [0, 0, 255]), 'outside it still blue');
  red.kill('SIGKILL');
  await waitPixel(page, 310, 210, [0, 0, 255], 'blue again where the window was');
  t.equal(received[0]?.type, 'frame', 'a key frame first');
  t.ok(received.some((m) => m.type === 'tiles'), 'then deltas');

  // Text scrolling in a terminal: deltas with scroll copies; once it stops, the canvas is the framebuffer.
  const done = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tiles-')), 'done');
  const term = x('xterm', ['-geometry', '100x30+0+0', '-bw', '0', '-e', 'sh', '-c',
    `for i in $(seq 1 120); do echo "line $i of the scrolling test ............"; sleep 0.02; done; touch ${done}; sleep 600`]);
  t.teardown(() => void term.kill('SIGKILL'));
  for (let i = 0; i < 600 && !fs.existsSync(done); i++) await new Promise((r) => setTimeout(r, 100));
  t.ok(fs.existsSync(done), 'the terminal printed everything');
  // JPEG q70 moves most samples a little; a misplaced line of text moves some a lot.
  let off = Infinity;
  for (let i = 0; i < 100 && off > 0.002; i++) {
    await new Promise((r) => setTimeout(r, 300));
    off = grossly(await canvasSamples(page), await screenSamples(g));
  }
  t.ok(off <= 0.002, `the canvas matches the framebuffer (${(off * 100).toFixed(2)}% of samples off by more than 96 of 255)`);
  t.ok(received.some((m) => m.copy), 'scrolling was sent as copies');
  t.same(b.errors, [], 'no console errors');
  await context.close();
});

type Rgb = [number, number, number];

/** `actual` when every channel is within 40 of `want` (JPEG), else `want` (so t.same shows both). */
function near(actual: Rgb, want: Rgb): Rgb {
  return actual.every((v, i) => Math.abs(v - want[i]!) <= 40) ? actual : want;
}

/** Page code is a string: no DOM types here (as test/helpers/dashboard.ts). */
async function pixel(page: Page, px: number, py: number): Promise<Rgb> {
  return page.evaluate<Rgb>(`(() => {
    const d = document.querySelector('canvas').getContext('2d').getImageData(${px}, ${py}, 1, 1).data;
    return [d[0], d[1], d[2]];
  })()`);
}

async function waitPixel(page: Page, px: number, py: number, want: Rgb, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const got = await pixel(page, px, py);
    if (near(got, want) !== want || got.every((v, j) => v === want[j])) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the canvas never showed ${what} at ${px},${py}`);
}

async function canvasSamples(page: Page): Promise<number[]> {
  return page.evaluate<number[]>(`(() => {
    const c = document.querySelector('canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const out = [];
    for (let y = 0; y < c.height; y += ${STEP}) for (let x = 0; x < c.width; x += ${STEP}) {
      const o = (y * c.width + x) * 4;
      out.push(d[o], d[o + 1], d[o + 2]);
    }
    return out;
  })()`);
}

async function screenSamples(g: Awaited<ReturnType<typeof startGatewayRig>>): Promise<number[]> {
  const f = await g.desktop.capture();
  const out: number[] = [];
  for (let y = 0; y < f.height; y += STEP) for (let x = 0; x < f.width; x += STEP) out.push(f.rgb[(y * f.width + x) * 3]!, f.rgb[(y * f.width + x) * 3 + 1]!, f.rgb[(y * f.width + x) * 3 + 2]!);
  g.desktop.releaseFrame(f);
  return out;
}

/** The fraction of sample channels that differ by more than 96. */
function grossly(a: number[], b: number[]): number {
  if (a.length !== b.length) return Infinity;
  let n = 0;
  for (let i = 0; i < a.length; i++) if (Math.abs(a[i]! - b[i]!) > 96) n++;
  return n / a.length;
}

import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { decodeToRgb } from '../../agent/src/desktop/screen.js';
import { heldModeReads, startDesktopAgent, waitFor, xrun, type DesktopAgent } from '../helpers/desktop-agent.js';

function pixel(f: { width: number; rgb: Buffer }, x: number, y: number): [number, number, number] {
  const i = (y * f.width + x) * 3;
  return [f.rgb[i]!, f.rgb[i + 1]!, f.rgb[i + 2]!];
}

function near(t: Test, got: number[], want: number[], tol: number, msg: string) {
  t.ok(got.every((v, i) => Math.abs(v - want[i]!) <= tol), `${msg}: ${got} ≈ ${want}`);
}

async function shot(a: DesktopAgent, query: string) {
  const r = await a.client.request('GET', `/screenshot${query}`);
  if (r.status !== 200) throw new Error(`screenshot ${r.status} ${r.body}`);
  const body = r.json();
  return { body, frame: await decodeToRgb(Buffer.from(body.image, 'base64')) };
}

/** Red root, and a green xterm (no window manager, so exactly where asked) at 100,100. */
async function paint(a: DesktopAgent) {
  t.equal((await xrun(a.xvfb.display, 'xsetroot', ['-solid', '#ff0000'])).code, 0);
  a.x('xterm', ['-bg', '#00ff00', '-fg', '#00ff00', '-geometry', '20x5+100+100', '-e', 'sleep', '600']);
  await waitFor(async () => {
    const { frame } = await shot(a, '?format=png');
    return pixel(frame, 110, 110)[1] === 255 && pixel(frame, 110, 110)[0] === 0;
  });
}

t.test('display, resize and screenshots over the real channel', async (t) => {
  const a = await startDesktopAgent(t);
  const c = a.client;

  t.test('health and display', async (t) => {
    const h = await c.request('GET', '/health');
    t.equal(h.status, 200);
    t.same(h.json(), { ok: true, protocol: 1, desktop: { width: 2560, height: 1600, up: true, resizable: true } });
    const d = await c.request('GET', '/display');
    t.equal(d.status, 200);
    t.same(d.json(), { width: 2560, height: 1600, up: true, resizable: true });
  });

  t.test('screenshot pixels in every format', async (t) => {
    await paint(a);
    const { body, frame } = await shot(a, '?format=png');
    t.equal(body.format, 'png');
    t.same(body.display, { width: 2560, height: 1600, up: true, resizable: true });
    t.equal(frame.width, 2560);
    t.equal(frame.height, 1600);
    t.same(pixel(frame, 110, 110), [0, 255, 0], 'inside the green window (png is exact)');
    t.same(pixel(frame, 50, 50), [255, 0, 0], 'red root');
    t.same(pixel(frame, 2559, 1599), [255, 0, 0], 'last pixel');
    for (const [fmt, q] of [['jpeg', 80], ['webp', 80], ['jpeg', 5]] as const) {
      const s = await shot(a, `?format=${fmt}&quality=${q}`);
      t.equal(s.body.format, fmt);
      t.equal(s.frame.width, 2560);
      near(t, pixel(s.frame, 120, 115), [0, 255, 0], 40, `${fmt} q${q} green`);
      near(t, pixel(s.frame, 50, 50), [255, 0, 0], 40, `${fmt} q${q} red`);
    }
    const lo = Buffer.from((await c.request('GET', '/screenshot?format=jpeg&quality=5')).json().image, 'base64');
    await c.request('POST', '/mouse/move', { x: 0, y: 0 });
    const hi = Buffer.from((await c.request('GET', '/screenshot?format=jpeg&quality=100')).json().image, 'base64');
    t.ok(hi.length > lo.length, 'quality changes the encoding');
    const def = await c.request('GET', '/screenshot');
    t.equal(def.json().format, 'png', 'png by default');
  });

  t.test('resize, then screenshots are cropped to the mode', async (t) => {
    const r = await c.request('POST', '/display/resize', { width: 1280, height: 800 });
    t.equal(r.status, 200);
    t.same(r.json(), { width: 1280, height: 800, up: true, resizable: true });
    const x = await xrun(a.xvfb.display, 'xrandr', ['--current']);
    t.match(x.stdout, /current 1280 x 800/);
    t.same((await c.request('GET', '/display')).json(), { width: 1280, height: 800, up: true, resizable: true });
    const { body, frame } = await shot(a, '?format=png');
    t.same(body.display, { width: 1280, height: 800, up: true, resizable: true });
    t.equal(frame.width, 1280);
    t.equal(frame.height, 800);
    t.same(pixel(frame, 110, 110), [0, 255, 0]);
    t.same(pixel(frame, 1279, 799), [255, 0, 0]);
    // A width that is not a multiple of 4 exercises the unaligned conversion path.
    const odd = await c.request('POST', '/display/resize', { width: 1001, height: 701 });
    t.same(odd.json(), { width: 1001, height: 701, up: true, resizable: true });
    const o = await shot(a, '?format=png');
    t.equal(o.frame.width, 1001);
    t.equal(o.frame.height, 701);
    t.same(pixel(o.frame, 110, 110), [0, 255, 0]);
    t.same(pixel(o.frame, 1000, 700), [255, 0, 0]);
    t.same(pixel(o.frame, 99, 110), [255, 0, 0], 'left of the window');
    // Coordinates follow the mode.
    const off = await c.request('POST', '/mouse/move', { x: 1001, y: 5 });
    t.equal(off.status, 400);
    t.same(off.json().error.details.map((d: { field: string }) => d.field), ['x']);
    t.equal((await c.request('POST', '/mouse/move', { x: 1000, y: 700 })).status, 200);
    const back = await c.request('POST', '/display/resize', { width: 1280, height: 800 });
    t.same(back.json(), { width: 1280, height: 800, up: true, resizable: true }, 'an existing mode is reused');
  });

  t.test('refused sizes', async (t) => {
    const big = await c.request('POST', '/display/resize', { width: 3000, height: 2000 });
    t.equal(big.status, 400);
    t.equal(big.json().error.code, 'invalid_request');
    t.same(
      big.json().error.details.map((d: { field: string }) => d.field),
      ['width', 'height'],
    );
    t.match(big.json().error.details[0].message, /2560/);
    t.match(big.json().error.details[1].message, /1600/);
    const wide = await c.request('POST', '/display/resize', { width: 2561, height: 1000 });
    t.equal(wide.status, 400);
    t.same(wide.json().error.details.map((d: { field: string }) => d.field), ['width'], 'only the dimension that is too large');
    const small = await c.request('POST', '/display/resize', { width: 100, height: 800 });
    t.equal(small.status, 400);
    t.equal(small.json().error.details[0].field, 'width');
    t.same((await c.request('GET', '/display')).json().width, 1280, 'size unchanged');
    const bad = await c.request('GET', '/screenshot?format=gif');
    t.equal(bad.status, 400);
    t.equal(bad.json().error.details[0].field, 'format');
    const q = await c.request('GET', '/screenshot?format=jpeg&quality=abc');
    t.equal(q.status, 400);
    t.equal(q.json().error.details[0].field, 'quality');
    const rep = await c.request('GET', '/screenshot?format=jpeg&format=png');
    t.equal(rep.status, 400);
  });

  t.test('a mode switched by another X client is picked up by the next input call', async (t) => {
    t.equal((await xrun(a.xvfb.display, 'xrandr', ['--output', 'screen', '--mode', '2560x1600'])).code, 0);
    const r = await c.request('POST', '/mouse/move', { x: 10, y: 10 });
    t.equal(r.status, 200);
    t.same(r.json().display, { width: 2560, height: 1600, up: true, resizable: true });
    t.equal((await c.request('POST', '/mouse/move', { x: 2000, y: 1500 })).status, 200, 'the larger space is accepted');
    const { frame } = await shot(a, '?format=png');
    t.equal(frame.width, 2560);
  });

  t.test('display down: 503 compute_unavailable; back up: everything works again', async (t) => {
    const { number, fbdir } = a.xvfb;
    a.xvfb.proc.kill('SIGTERM');
    await waitFor(async () => (await c.request('GET', '/health')).json().desktop.up === false);
    for (const [m, p, b] of [
      ['GET', '/display', undefined],
      ['GET', '/screenshot?format=jpeg', undefined],
      ['GET', '/screen/stream', undefined],
      ['POST', '/display/resize', { width: 800, height: 600 }],
      ['POST', '/mouse/move', { x: 1, y: 1 }],
      ['POST', '/mouse/click', {}],
      ['POST', '/keyboard/type', { text: 'x' }],
      ['POST', '/keyboard/key', { key: 'a' }],
      ['POST', '/keyboard/hotkey', { keys: ['a'] }],
      ['GET', '/clipboard', undefined],
      ['PUT', '/clipboard', { text: 'x' }],
    ] as const) {
      const r = await c.request(m, p, b);
      t.equal(r.status, 503, `${m} ${p}`);
      t.equal(r.json().error.code, 'compute_unavailable');
      t.equal(r.headers['retry-after'], '1');
    }
    // The image's init would restart it: same display number, same framebuffer directory.
    fs.mkdirSync(fbdir, { recursive: true });
    const again = spawn('Xvfb', [`:${number}`, '-screen', '0', '1024x768x24', '-fbdir', fbdir, '-noreset', '-nolisten', 'tcp'], { stdio: 'ignore' });
    t.teardown(() => {
      again.kill('SIGKILL');
    });
    await waitFor(async () => (await c.request('GET', '/health')).json().desktop.up === true);
    t.same((await c.request('GET', '/display')).json(), { width: 1024, height: 768, up: true, resizable: true });
    const mv = await c.request('POST', '/mouse/move', { x: 1000, y: 700 });
    t.equal(mv.status, 200);
    t.same(mv.json().pointer, { x: 1000, y: 700 }, 'xdotool reconnected to the new server');
    const { frame } = await shot(a, '?format=png');
    t.equal(frame.width, 1024);
    t.equal((await c.request('POST', '/keyboard/key', { key: 'a' })).status, 200, 'keymap connection renewed');
    t.ok(a.lines.some((l) => l.event === 'desktop' && l.up === false));
  });
});

t.test('a mode read that started before a mode switch never puts the old size back (issue 21 item 2)', async (t) => {
  // GET /display reads the modes outside the input lock. A read that saw 1280x800 and answered after a
  // resize to 1920x1200 (or an input call's re-read after another client switched) used to set 1280x800
  // again: every coordinate beyond it was then refused with 400 while down/up still pressed and released
  // where the pointer was. `hold` makes that overlap happen every time.
  const reads = heldModeReads();
  const a = await startDesktopAgent(t, { modes: reads.io });
  const c = a.client;
  const D1920 = { width: 1920, height: 1200, up: true, resizable: true };

  t.test('GET /display overlapping POST /display/resize', async (t) => {
    t.equal((await c.request('POST', '/display/resize', { width: 1280, height: 800 })).status, 200);
    const h = reads.hold();
    const slow = c.request('GET', '/display');
    t.match(await h.held, { width: 1280, height: 800 }, 'the held read saw the mode before the resize');
    // More reads in flight around the resize (these are not held: they land whenever xrandr answers).
    const around = [c.request('GET', '/display'), c.request('GET', '/display')];
    const r = await c.request('POST', '/display/resize', { width: 1920, height: 1200 });
    t.equal(r.status, 200);
    t.same(r.json(), D1920);
    h.release();
    const late = await slow;
    t.equal(late.status, 200);
    t.same(late.json(), D1920, 'the late read answers the size a later read applied');
    for (const g of await Promise.all(around)) t.equal(g.status, 200);
    t.same((await c.request('GET', '/health')).json().desktop, D1920);
    const mv = await c.request('POST', '/mouse/move', { x: 1900, y: 1150 });
    t.equal(mv.status, 200, `mouse/move to (1900,1150) at 1920x1200: ${mv.body}`);
    t.same(mv.json().pointer, { x: 1900, y: 1150 });
  });

  t.test("GET /display overlapping an input call's re-read after another X client switched modes", async (t) => {
    t.equal((await c.request('POST', '/display/resize', { width: 1280, height: 800 })).status, 200);
    const h = reads.hold();
    const slow = c.request('GET', '/display');
    t.match(await h.held, { width: 1280, height: 800 });
    t.equal((await xrun(a.xvfb.display, 'xrandr', ['--output', 'screen', '--mode', '1920x1200'])).code, 0);
    const first = await c.request('POST', '/mouse/move', { x: 10, y: 10 });
    t.equal(first.status, 200);
    t.same(first.json().display, D1920, 'the input call saw the screen change and re-read the modes');
    h.release();
    t.same((await slow).json(), D1920);
    const mv = await c.request('POST', '/mouse/move', { x: 1900, y: 1150 });
    t.equal(mv.status, 200, `mouse/move to (1900,1150) at 1920x1200: ${mv.body}`);
  });
});

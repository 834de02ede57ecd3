import t from 'tap';
import { spawn } from 'node:child_process';
import { startDesktopAgent, waitFor, xrun } from '../helpers/desktop-agent.js';

interface XEvent {
  type: string;
  root: { x: number; y: number } | null;
  button: number | null;
  state: number;
}

/** xev's report, parsed into events (blocks separated by blank lines). */
function parseXev(text: string): XEvent[] {
  const out: XEvent[] = [];
  for (const block of text.split(/\n\s*\n/)) {
    const type = /^(\w+) event/.exec(block.trim())?.[1];
    if (!type) continue;
    const root = /root:\((-?\d+),(-?\d+)\)/.exec(block);
    const button = /button (\d+)/.exec(block);
    const state = /state 0x([0-9a-f]+)/.exec(block);
    out.push({
      type,
      root: root ? { x: Number(root[1]), y: Number(root[2]) } : null,
      button: button ? Number(button[1]) : null,
      state: state ? parseInt(state[1]!, 16) : 0,
    });
  }
  return out;
}

t.test('pointer over the real channel, verified by a real X client (xev)', async (t) => {
  const a = await startDesktopAgent(t);
  const c = a.client;
  // xev's window covers 300..499 on both axes; it prints every event it gets.
  const xev = spawn('stdbuf', ['-oL', 'xev', '-geometry', '200x200+300+300'], {
    env: { PATH: process.env.PATH, DISPLAY: a.xvfb.display },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  t.teardown(() => {
    xev.kill('SIGKILL');
  });
  let log = '';
  xev.stdout.on('data', (d) => (log += d));
  await waitFor(() => log.includes('MapNotify') || log.includes('Expose'));
  const mark = () => log.length;
  const since = async (from: number, pred: (ev: XEvent[]) => boolean) => {
    return waitFor(() => {
      const ev = parseXev(log.slice(from));
      return pred(ev) ? ev : null;
    }, 5000);
  };
  const presses = (ev: XEvent[], b: number) => ev.filter((e) => e.type === 'ButtonPress' && e.button === b);
  const releases = (ev: XEvent[], b: number) => ev.filter((e) => e.type === 'ButtonRelease' && e.button === b);

  t.test('move answers the new pointer position', async (t) => {
    const r = await c.request('POST', '/mouse/move', { x: 123, y: 45 });
    t.equal(r.status, 200);
    t.same(r.json(), { display: { width: 2560, height: 1600, up: true, resizable: true }, pointer: { x: 123, y: 45 } });
  });

  t.test('left click at a point', async (t) => {
    const m = mark();
    const r = await c.request('POST', '/mouse/click', { at: { x: 350, y: 360 } });
    t.equal(r.status, 200);
    t.same(r.json().pointer, { x: 350, y: 360 });
    const ev = await since(m, (e) => releases(e, 1).length === 1);
    t.same(presses(ev, 1).map((e) => e.root), [{ x: 350, y: 360 }]);
  });

  t.test('double click with the right button, at the current position', async (t) => {
    const m = mark();
    const r = await c.request('POST', '/mouse/click', { button: 'right', count: 2 });
    t.equal(r.status, 200);
    const ev = await since(m, (e) => releases(e, 3).length === 2);
    t.equal(presses(ev, 3).length, 2);
    t.same(presses(ev, 3)[0]!.root, { x: 350, y: 360 });
    t.equal(presses(ev, 1).length, 0, 'no left click');
  });

  t.test('middle button held across calls', async (t) => {
    const m = mark();
    t.equal((await c.request('POST', '/mouse/click', { button: 'middle', down: true, at: { x: 400, y: 400 } })).status, 200);
    await since(m, (e) => presses(e, 2).length === 1);
    t.equal(releases(parseXev(log.slice(m)), 2).length, 0, 'not released yet');
    t.equal((await c.request('POST', '/mouse/move', { x: 420, y: 410 })).status, 200);
    t.equal((await c.request('POST', '/mouse/click', { button: 'middle', up: true })).status, 200);
    const ev = await since(m, (e) => releases(e, 2).length === 1);
    t.same(releases(ev, 2)[0]!.root, { x: 420, y: 410 });
    // Button2Mask (0x200) is set on motion while the button is held.
    t.ok(ev.some((e) => e.type === 'MotionNotify' && (e.state & 0x200) !== 0), 'motion with the button held');
  });

  t.test('drag with intermediate steps', async (t) => {
    const m = mark();
    const r = await c.request('POST', '/mouse/drag', { from: { x: 310, y: 310 }, to: { x: 410, y: 460 }, steps: 5 });
    t.equal(r.status, 200);
    t.same(r.json().pointer, { x: 410, y: 460 });
    const ev = await since(m, (e) => releases(e, 1).length === 1);
    t.same(presses(ev, 1)[0]!.root, { x: 310, y: 310 });
    t.same(releases(ev, 1)[0]!.root, { x: 410, y: 460 });
    const held = ev.filter((e) => e.type === 'MotionNotify' && (e.state & 0x100) !== 0);
    t.ok(held.length >= 4, `motion events with button 1 held (${held.length})`);
    t.ok(held.some((e) => e.root!.x === 350 && e.root!.y === 370), 'passes through an intermediate point');
  });

  t.test('drag from the current position', async (t) => {
    await c.request('POST', '/mouse/move', { x: 330, y: 330 });
    const m = mark();
    t.equal((await c.request('POST', '/mouse/drag', { to: { x: 340, y: 340 }, steps: 1 })).status, 200);
    const ev = await since(m, (e) => releases(e, 1).length === 1);
    t.same(presses(ev, 1)[0]!.root, { x: 330, y: 330 });
  });

  t.test('scroll: default amount 3, direction and at', async (t) => {
    let m = mark();
    t.equal((await c.request('POST', '/mouse/scroll', { direction: 'down' })).status, 200);
    let ev = await since(m, (e) => releases(e, 5).length === 3);
    t.equal(presses(ev, 5).length, 3);
    m = mark();
    const r = await c.request('POST', '/mouse/scroll', { direction: 'up', amount: 2, at: { x: 450, y: 320 } });
    t.same(r.json().pointer, { x: 450, y: 320 });
    ev = await since(m, (e) => releases(e, 4).length === 2);
    t.same(presses(ev, 4)[0]!.root, { x: 450, y: 320 });
    m = mark();
    t.equal((await c.request('POST', '/mouse/scroll', { direction: 'right', amount: 1 })).status, 200);
    ev = await since(m, (e) => releases(e, 7).length === 1);
    t.equal(presses(ev, 7).length, 1);
  });

  t.test('coordinates outside the display are refused, never clamped', async (t) => {
    const before = (await c.request('POST', '/mouse/move', { x: 5, y: 6 })).json().pointer;
    const cases: Array<[string, unknown, string[]]> = [
      ['/mouse/move', { x: 2560, y: 10 }, ['x']],
      ['/mouse/move', { x: 2559, y: 1600 }, ['y']],
      ['/mouse/move', { x: 9000, y: 9000 }, ['x', 'y']],
      ['/mouse/click', { at: { x: 10, y: 1600 } }, ['at.y']],
      ['/mouse/drag', { from: { x: 2600, y: 0 }, to: { x: 0, y: 1700 } }, ['from.x', 'to.y']],
      ['/mouse/scroll', { direction: 'up', at: { x: 3000, y: 0 } }, ['at.x']],
      ['/mouse/move', { x: -1, y: 0 }, ['x']],
      ['/mouse/move', { x: 20000, y: 0 }, ['x']],
    ];
    for (const [route, body, fields] of cases) {
      const r = await c.request('POST', route, body);
      t.equal(r.status, 400, `${route} ${JSON.stringify(body)}`);
      t.equal(r.json().error.code, 'invalid_request');
      t.same(r.json().error.details.map((d: { field: string }) => d.field).sort(), fields.sort());
    }
    const after = (await c.request('POST', '/mouse/move', { x: 5, y: 6 })).json().pointer;
    t.same(after, before, 'pointer did not move');
  });

  t.test('bad bodies', async (t) => {
    const cases: Array<[string, unknown, string]> = [
      ['/mouse/click', { button: 'fourth' }, 'button'],
      ['/mouse/click', { count: 4 }, 'count'],
      ['/mouse/click', { down: true, up: true }, 'up'],
      ['/mouse/drag', { from: { x: 1, y: 1 } }, 'to'],
      ['/mouse/drag', { to: { x: 1, y: 1 }, steps: 0 }, 'steps'],
      ['/mouse/scroll', { direction: 'sideways' }, 'direction'],
      ['/mouse/scroll', { direction: 'up', amount: 0 }, 'amount'],
      ['/mouse/move', { x: 1.5, y: 1 }, 'x'],
      ['/mouse/move', { x: 1, y: 1, z: 1 }, '(body)'],
    ];
    for (const [route, body, field] of cases) {
      const r = await c.request('POST', route, body);
      t.equal(r.status, 400, `${route} ${JSON.stringify(body)}`);
      t.ok(r.json().error.details.some((d: { field: string }) => d.field === field), `details name ${field}`);
    }
  });

  t.test('xdotool is restarted if it dies', async (t) => {
    const ps = await xrun(a.xvfb.display, 'pgrep', ['-f', '-P', String(process.pid), 'xdotool']);
    t.equal(ps.code, 0);
    for (const pid of ps.stdout.trim().split('\n')) process.kill(Number(pid), 'SIGKILL');
    const r = await waitFor(async () => {
      const res = await c.request('POST', '/mouse/move', { x: 77, y: 88 });
      return res.status === 200 ? res : null;
    });
    t.same(r.json().pointer, { x: 77, y: 88 });
  });
});

// --display-ready: the agent listens before the display is ready, and desktop requests wait for the
// init's ready file (real Xvfb, real channel) instead of using the display in Xvfb's start size.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAgentArgs } from '../../agent/src/config.js';
import type { Desktop } from '../../agent/src/desktop/desktop.js';
import { decodeToRgb } from '../../agent/src/desktop/screen.js';
import { startDesktopAgent, waitFor, xrun } from '../helpers/desktop-agent.js';
import type { H2Client } from '../helpers/h2-client.js';
import { XVFB_MAX_WIDTH, type TestDisplay } from '../helpers/xvfb.js';

interface Rig {
  xvfb: TestDisplay;
  desktop: Desktop;
  client: H2Client;
  readyFile: string;
}

async function rig(t: Test, opts: { readyTimeoutMs: number; pollMs?: number }): Promise<Rig> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-ready-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const readyFile = path.join(dir, 'display-ready');
  const a = await startDesktopAgent(t, { ...opts, readyFile });
  return { xvfb: a.xvfb, desktop: a.desktop, client: a.client, readyFile };
}

/** What the image's init does before it creates the ready file: switch Xvfb down to the default mode. */
async function switchToDefaultMode(display: string): Promise<void> {
  await xrun(display, 'xrandr', ['--newmode', '1280x800', '0', '1280', '1280', '1280', '1280', '800', '800', '800', '800']);
  await xrun(display, 'xrandr', ['--addmode', 'screen', '1280x800']);
  const r = await xrun(display, 'xrandr', ['--output', 'screen', '--mode', '1280x800']);
  if (r.code !== 0) throw new Error('xrandr could not switch to 1280x800');
}

t.test('--display-ready is a flag of the agent', async (t) => {
  const r = parseAgentArgs(['--socket', '/s', '--enroll-file', '/e', '--display-ready', '/run/xvfb/display-ready']);
  t.equal(r.help, false);
  if (!r.help) t.equal(r.config.displayReady, '/run/xvfb/display-ready');
  const none = parseAgentArgs(['--socket', '/s', '--enroll-file', '/e']);
  if (!none.help) t.equal(none.config.displayReady, undefined, 'absent: the display is used as soon as it answers');
});

t.test('requests made before the ready file exists are answered once it appears, in the real mode', async (t) => {
  const a = await rig(t, { readyTimeoutMs: 30_000 });
  // The display answers already (Xvfb at its 2560x1600 start size), but nothing has touched it.
  t.equal(a.desktop.isUp, false, 'not brought up before the ready file');
  const h = await a.client.request('GET', '/health');
  t.equal(h.status, 200, 'health answers at once');
  t.equal(h.json().desktop.up, false);

  let fileCreated = false;
  const answeredAfterFile: boolean[] = [];
  const track = <T>(p: Promise<T>) =>
    p.then((v) => {
      answeredAfterFile.push(fileCreated);
      return v;
    });
  const display = track(a.client.request('GET', '/display'));
  const shot = track(a.client.request('GET', '/screenshot?format=png'));
  // x=2000 is on the 2560-wide start screen but not on the 1280x800 default mode.
  const move = track(a.client.request('POST', '/mouse/move', { x: 2000, y: 10 }));

  // Give the requests time to reach the agent; none may be answered while the file is missing.
  await new Promise((r) => setTimeout(r, 300));
  t.same(answeredAfterFile, [], 'no answer before the ready file');
  await switchToDefaultMode(a.xvfb.display);
  fileCreated = true;
  fs.writeFileSync(a.readyFile, '');

  const d = await display;
  t.equal(d.status, 200);
  t.same(d.json(), { width: 1280, height: 800, up: true, resizable: true });
  const s = await shot;
  t.equal(s.status, 200);
  t.same(s.json().display, { width: 1280, height: 800, up: true, resizable: true });
  const frame = await decodeToRgb(Buffer.from(s.json().image, 'base64'));
  t.equal(frame.width, 1280);
  t.equal(frame.height, 800);
  const m = await move;
  t.equal(m.status, 400, 'coordinates are checked against the real mode');
  t.equal(m.json().error.details[0].field, 'x');
  t.same(answeredAfterFile, [true, true, true], 'every answer came after the ready file');
});

t.test('a ready file that never appears: 503 after the bound; the display still comes up if it does later', async (t) => {
  const a = await rig(t, { readyTimeoutMs: 400, pollMs: 50 });
  const r = await a.client.request('GET', '/display');
  t.equal(r.status, 503);
  t.equal(r.json().error.code, 'compute_unavailable');
  t.match(r.json().error.message, /did not become ready/);
  t.equal(r.headers['retry-after'], '1');
  t.equal(a.desktop.isUp, false, 'the display in its start size was never used');
  const s = await a.client.request('GET', '/screenshot?format=jpeg');
  t.equal(s.status, 503, 'every desktop route refuses');
  t.equal((await a.client.request('GET', '/health')).status, 200, 'health still answers');

  fs.writeFileSync(a.readyFile, '');
  await waitFor(() => a.desktop.isUp, 10_000, 20);
  const d = await a.client.request('GET', '/display');
  t.equal(d.status, 200);
  t.same(d.json(), { width: XVFB_MAX_WIDTH, height: 1600, up: true, resizable: true });
});

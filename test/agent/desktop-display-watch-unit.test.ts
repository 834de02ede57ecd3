/**
 * DisplayWatch (agent/src/desktop/display-watch.ts), the sequencing half of the desktop: the ready file
 * gate, the start-up wait requests join, its timeout (a 503 for requests, one log line), coalesced checks,
 * going down and coming back. The probe is scripted; the ready file is a real file.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { AppError } from '../../shared/errors.js';
import { DisplayWatch, type DisplayProbe } from '../../agent/src/desktop/display-watch.js';

function scripted() {
  const calls: string[] = [];
  const st = { present: true, healthy: true, connectOk: true, gate: null as null | Promise<void> };
  const probe: DisplayProbe = {
    present: () => st.present,
    healthy: () => st.healthy,
    async connect() {
      calls.push('connect');
      if (st.gate) await st.gate;
      return st.connectOk;
    },
    cameUp: () => calls.push('up'),
    down: () => calls.push('down'),
  };
  return { calls, st, probe };
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'display-watch-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

t.test('without a ready file: start checks once and the display is up', async (t) => {
  const s = scripted();
  const w = new DisplayWatch({ probe: s.probe, log: () => {}, pollMs: 60_000 });
  t.teardown(() => w.close());
  await w.start();
  t.equal(w.up, true);
  t.same(s.calls, ['connect', 'up']);
  await w.whenStarted();
});

t.test('with a ready file: nothing is touched until it exists, and requests wait for it', async (t) => {
  const ready = path.join(tmp, 'ready-1');
  const s = scripted();
  const w = new DisplayWatch({ probe: s.probe, log: () => {}, readyFile: ready, pollMs: 60_000 });
  t.teardown(() => w.close());
  await w.start();
  let started = false;
  const waiting = w.whenStarted().then(() => (started = true));
  await new Promise((r) => setTimeout(r, 50));
  t.same(s.calls, [], 'no connect before the init says the display is ready');
  t.equal(started, false, 'a request waits');
  fs.writeFileSync(ready, '');
  await waiting;
  t.equal(w.up, true);
  t.same(s.calls, ['connect', 'up']);
});

t.test('the ready file never appears: requests get a retryable 503 and one log line', async (t) => {
  const logs: unknown[] = [];
  const s = scripted();
  const w = new DisplayWatch({ probe: s.probe, log: (l) => logs.push(l), readyFile: path.join(tmp, 'never'), readyTimeoutMs: 100, pollMs: 60_000 });
  t.teardown(() => w.close());
  await w.start();
  const err = await w.whenStarted().then(() => null, (e: unknown) => e);
  t.ok(err instanceof AppError);
  t.equal((err as AppError).code, 'compute_unavailable');
  t.same((err as AppError).headers, { 'retry-after': '1' });
  t.same(logs, [{ event: 'desktop', up: false, reason: 'ready_file_missing' }]);
  t.same(s.calls, []);
});

t.test('concurrent checks connect once; down and back up', async (t) => {
  const s = scripted();
  s.st.present = false;
  const w = new DisplayWatch({ probe: s.probe, log: () => {}, pollMs: 60_000 });
  t.teardown(() => w.close());
  await w.start();
  t.equal(w.up, false, 'no socket/framebuffer yet');
  t.same(s.calls, []);
  s.st.present = true;
  let open!: () => void;
  s.st.gate = new Promise((r) => (open = r));
  const a = w.check();
  const b = w.check();
  open();
  await Promise.all([a, b]);
  t.same(s.calls, ['connect', 'up'], 'one connect for two checks');
  s.st.gate = null;
  s.st.healthy = false;
  await w.check();
  t.equal(w.up, false);
  t.same(s.calls, ['connect', 'up', 'down']);
  s.st.healthy = true;
  s.st.connectOk = false;
  await w.check();
  t.equal(w.up, false, 'a failed connect leaves it down');
  s.st.connectOk = true;
  await w.check();
  t.equal(w.up, true);
  t.same(s.calls, ['connect', 'up', 'down', 'connect', 'connect', 'up']);
});

t.test('closed: no more checks', async (t) => {
  const s = scripted();
  const w = new DisplayWatch({ probe: s.probe, log: () => {}, pollMs: 60_000 });
  w.close();
  await w.check();
  t.same(s.calls, []);
  t.equal(w.up, false);
});

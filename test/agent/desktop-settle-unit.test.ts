import t from 'tap';
import { diffBox, waitSettled } from '../../agent/src/desktop/settle.js';
import type { RawFrame } from '../../agent/src/desktop/screen.js';

const frame = (w: number, h: number, paint: Array<[number, number]> = []): RawFrame => {
  const rgb = Buffer.alloc(w * h * 3);
  for (const [x, y] of paint) rgb[(y * w + x) * 3 + 1] = 200;
  return { width: w, height: h, rgb };
};

t.test('diffBox', async (t) => {
  t.equal(diffBox(frame(7, 5).rgb, frame(7, 5).rgb, 7, 5), null, 'equal frames');
  t.same(diffBox(frame(7, 5).rgb, frame(7, 5, [[3, 2]]).rgb, 7, 5), { x: 3, y: 2, width: 1, height: 1 });
  t.same(diffBox(frame(7, 5).rgb, frame(7, 5, [[1, 4], [6, 0], [2, 2]]).rgb, 7, 5), { x: 1, y: 0, width: 6, height: 5 });
  t.same(diffBox(frame(7, 5, [[0, 1]]).rgb, frame(7, 5, [[0, 3]]).rgb, 7, 5), { x: 0, y: 1, width: 1, height: 3 });
});

t.test('waitSettled against a scripted screen', async (t) => {
  // A fake clock: each sleep advances it; the screen changes at given times.
  let now = 1_000_000;
  const realNow = Date.now;
  Date.now = () => now;
  t.teardown(() => {
    Date.now = realNow;
  });
  const sleep = async (ms: number) => {
    now += ms;
  };
  const before = frame(4, 4);
  const script = (changesUntil: number) => async () => (now - 1_000_000 < changesUntil ? frame(4, 4, [[now % 4, 1]]) : frame(4, 4, [[2, 2]]));
  let o = await waitSettled(async () => frame(4, 4), () => {}, before, now, { quiet_ms: 100, timeout_ms: 1000 }, sleep);
  t.match(o, { settled: true, changed: false, changed_box: null });
  t.equal(o.duration_ms, 100, 'a quiet screen settles after quiet_ms');

  now = 1_000_000;
  o = await waitSettled(script(200), () => {}, before, now, { quiet_ms: 100, timeout_ms: 1000 }, sleep);
  t.match(o, { settled: true, changed: true, changed_box: { x: 2, y: 2, width: 1, height: 1 } });
  t.ok(o.duration_ms >= 300 && o.duration_ms <= 320, `settles quiet_ms after the last change (${o.duration_ms})`);

  now = 1_000_000;
  o = await waitSettled(script(10_000), () => {}, before, now, { quiet_ms: 100, timeout_ms: 500 }, sleep);
  t.match(o, { settled: false, changed: true });
  t.ok(o.duration_ms >= 500 && o.duration_ms <= 515, `gives up at timeout_ms (${o.duration_ms})`);
});

import t from 'tap';
import { openAIKey, wheelClicks } from '../../control-plane/src/computer-tools/openai.js';
import { pyRound, referenceDeclaredSize, Scaler } from '../../control-plane/src/computer-tools/scaling.js';

t.test("Python's round: ties to even", async (t) => {
  t.same([0.5, 1.5, 2.5, 3.5, -0.5, 2.4, 2.6, 7].map(pyRound), [0, 2, 2, 4, -0, 2, 3, 7]);
});

t.test('the size the reference declares', async (t) => {
  t.same(referenceDeclaredSize(2560, 1600), { width: 1280, height: 800 }, '16:10 → WXGA');
  t.same(referenceDeclaredSize(1920, 1080), { width: 1366, height: 768 }, '16:9 → FWXGA (within 0.02)');
  t.same(referenceDeclaredSize(2048, 1536), { width: 1024, height: 768 }, '4:3 → XGA');
  t.same(referenceDeclaredSize(1280, 800), { width: 1280, height: 800 }, 'already the target: unscaled');
  t.same(referenceDeclaredSize(1000, 1000), { width: 1000, height: 1000 }, 'no matching ratio: unscaled');
  t.same(referenceDeclaredSize(800, 600), { width: 800, height: 600 }, 'smaller than the target: unscaled');
});

t.test('coordinates', async (t) => {
  const s = new Scaler({ width: 1920, height: 1080 }, { width: 1366, height: 768 });
  // 1366/1920 = 0.7114583..., 768/1080 = 0.7111...
  t.same(s.toScreen(683, 384), { x: 960, y: 540 });
  t.same(s.toScreen(100, 100), { x: 141, y: 141 });
  t.same(s.toScreen(1366, 768), { x: 1919, y: 1079 }, 'the declared edge stays on screen');
  t.equal(s.toScreen(1367, 10), null, 'outside the declared screen');
  t.same(s.toApi(960, 540), { x: 683, y: 384 });
  t.same(s.toApi(141, 141), { x: 100, y: 100 });
  const half = new Scaler({ width: 2560, height: 1600 }, { width: 1280, height: 800 });
  t.same(half.toScreen(3, 5), { x: 6, y: 10 });
  t.same(half.toApi(7, 9), { x: 4, y: 4 }, '3.5 and 4.5 both round to 4 (half to even)');
});

t.test('OpenAI key names and scroll amounts', async (t) => {
  t.same(['CTRL', 'A', 'enter', 'ArrowLeft', 'space', 'F5', '/', 'Return'].map(openAIKey), ['Control_L', 'a', 'Return', 'Left', 'space', 'F5', 'slash', 'Return']);
  t.same([0, 1, 49, 150, -300, 1_000_000].map(wheelClicks), [0, 1, 1, 2, 3, 100]);
});

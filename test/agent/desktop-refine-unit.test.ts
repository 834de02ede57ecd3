/**
 * Lower quality during continuous motion and full-quality refinement once it settles
 * (agent/src/desktop/refine.ts): the quality rule, the motion counter and the map of what the viewer
 * holds below full quality. Expectations are literal numbers and rectangles.
 */
import t from 'tap';
import { LowQualityTiles, Motion, motionQuality } from '../../agent/src/desktop/refine.js';

t.test('quality in motion: half the stream\'s, not below 20, never above the stream\'s', async (t) => {
  t.same([100, 60, 30, 15].map(motionQuality), [50, 30, 20, 15]);
});

t.test('motion: from the third consecutive changed tick; settled after 150 ms without a change', async (t) => {
  const m = new Motion();
  t.same([m.changed(0), m.changed(33), m.changed(66), m.changed(99)], [false, false, true, true]);
  t.same([m.still(132), m.still(248), m.still(249)], [false, false, true]);
  t.equal(m.changed(300), false, 'a still tick ends the run');
});

t.test('low-quality map: painted strips, moved by scroll copies, cleared by full-quality paints', async (t) => {
  const q = new LowQualityTiles(256, 200);
  t.equal(q.empty, true);
  q.paint({ x: 0, y: 190, w: 256, h: 10 }, true);
  t.same(q.rects(), [{ x: 0, y: 190, w: 256, h: 10 }]);
  // Scrolling down by 10 rows: the strip moves up with the content; the viewer still holds the old rows below.
  q.copy({ sx: 0, sy: 10, x: 0, y: 0, w: 256, h: 190 });
  t.same(q.rects(), [{ x: 0, y: 180, w: 256, h: 20 }]);
  q.paint({ x: 0, y: 180, w: 256, h: 10 }, false);
  t.same(q.rects(), [{ x: 0, y: 190, w: 256, h: 10 }], 'a full-quality paint clears what it covers');
  q.paint({ x: 10, y: 190, w: 20, h: 10 }, false);
  t.same(q.rects(), [{ x: 0, y: 190, w: 256, h: 10 }], 'not a tile column it covers only in part');
  q.paint({ x: 64, y: 0, w: 64, h: 5 }, true);
  t.same(q.rects(), [{ x: 64, y: 0, w: 64, h: 5 }, { x: 0, y: 190, w: 256, h: 10 }]);
  q.clear();
  t.equal(q.empty, true);
});

t.test('a copy that covers a tile column in part keeps what the column held', async (t) => {
  const q = new LowQualityTiles(256, 200);
  q.paint({ x: 64, y: 0, w: 64, h: 10 }, true);
  q.copy({ sx: 0, sy: 0, x: 0, y: 50, w: 100, h: 10 });
  t.same(q.rects(), [{ x: 64, y: 0, w: 64, h: 60 }]);
  // A copy spanning the column whole replaces its state: here with unmarked rows.
  q.copy({ sx: 0, sy: 100, x: 0, y: 0, w: 256, h: 60 });
  t.equal(q.empty, true);
});

/**
 * The screen stream's `tiles` encoding: frame differencing on the 64-pixel grid, grouping into rectangles,
 * scroll detection (agent/src/desktop/tiles.ts), and the stream's key frame / delta sequence with a fake
 * screen source (agent/src/desktop/stream.ts). Expectations are literal rectangles.
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { ScreenStreamDecoder } from '../../shared/agent-protocol.js';
import { runScreenStream, type StreamSource } from '../../agent/src/desktop/stream.js';
import { diffFrames, FrameDiffer, rowHashes } from '../../agent/src/desktop/tiles.js';
import { encodeRgb } from '../../agent/src/desktop/screen.js';
import { waitFor } from '../helpers/desktop-agent.js';

/** A frame of a flat grey, with the given pixels set to red. */
function frame(width: number, height: number, red: Array<[number, number]> = []): Buffer {
  const b = Buffer.alloc(width * height * 3, 0x80);
  for (const [x, y] of red) b.set([255, 0, 0], (y * width + x) * 3);
  return b;
}

/** A frame whose every row `i` of content is distinct: row y shows content row y + offset. */
function striped(width: number, height: number, offset: number): Buffer {
  const b = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    const c = y + offset;
    for (let x = 0; x < width; x++) b.set([c & 255, (c >> 8) * 40 + (x >> 5), (c * 7) & 255], (y * width + x) * 3);
  }
  return b;
}

t.test('changed tiles become rectangles on the 64-pixel grid, clipped to the frame, trimmed to changed rows and columns', async (t) => {
  const base = frame(200, 130);
  t.equal(diffFrames(base, frame(200, 130), 200, 130), null, 'nothing changed: no delta');
  t.same(diffFrames(base, frame(200, 130, [[70, 10]]), 200, 130), { copy: null, rects: [{ x: 70, y: 10, w: 1, h: 1 }] });
  t.same(diffFrames(base, frame(200, 130, [[5, 5], [70, 5], [70, 70]]), 200, 130), {
    copy: null,
    rects: [{ x: 5, y: 5, w: 66, h: 1 }, { x: 70, y: 70, w: 1, h: 1 }],
  }, 'a run in a tile row is one rectangle');
  t.same(diffFrames(base, frame(200, 130, [[199, 129]]), 200, 130), { copy: null, rects: [{ x: 199, y: 129, w: 1, h: 1 }] }, 'the partial corner tile');
  t.same(diffFrames(base, frame(200, 130, [[70, 5], [70, 70], [70, 129]]), 200, 130), { copy: null, rects: [{ x: 70, y: 5, w: 1, h: 125 }] },
    'the same columns in consecutive tile rows merge downwards');
});

t.test('row hashes are the same read as 32-bit words or byte by byte (an unaligned buffer)', async (t) => {
  const f = striped(128, 40, 3);
  const unaligned = Buffer.alloc(f.length + 1).subarray(1);
  f.copy(unaligned);
  const box = { x: 64, y: 2, w: 64, h: 30 };
  t.same([...rowHashes(unaligned, 128, box)], [...rowHashes(f, 128, box)]);
  t.not(rowHashes(f, 128, box)[0], rowHashes(f, 128, box)[1], 'distinct rows, distinct hashes');
});

t.test('a FrameDiffer over a continuous scroll gives the same deltas as diffFrames, reusing its hashes', async (t) => {
  const d = new FrameDiffer();
  const steps = [0, 12, 30, 30, 47];
  const got = [];
  for (let i = 1; i < steps.length; i++) got.push(d.diff(striped(256, 256, steps[i - 1]!), striped(256, 256, steps[i]!), 256, 256));
  t.same(got, [
    { copy: { sx: 0, sy: 12, x: 0, y: 0, w: 256, h: 244 }, rects: [{ x: 0, y: 244, w: 256, h: 12 }] },
    { copy: { sx: 0, sy: 18, x: 0, y: 0, w: 256, h: 238 }, rects: [{ x: 0, y: 238, w: 256, h: 18 }] },
    null,
    { copy: { sx: 0, sy: 17, x: 0, y: 0, w: 256, h: 239 }, rects: [{ x: 0, y: 239, w: 256, h: 17 }] },
  ]);
  // Hashes kept from a `cur` that is not the next `prev` cost bytes, never a wrong picture: the guess
  // is checked against the frame with the copy applied.
  d.diff(striped(256, 256, 100), striped(256, 256, 110), 256, 256);
  t.same(d.diff(striped(256, 256, 0), frame(256, 256), 256, 256), { copy: null, rects: [{ x: 0, y: 0, w: 256, h: 256 }] });
});

t.test('more than 48 rectangles are sent as their bounding box', async (t) => {
  // A checkerboard of changed tiles at 1280x800: 130 separate tiles.
  const pts: Array<[number, number]> = [];
  for (let ty = 0; ty < 13; ty++) for (let tx = 0; tx < 20; tx++) if ((tx + ty) % 2 === 0) pts.push([tx * 64 + 1, ty * 64 + 1]);
  t.same(diffFrames(frame(1280, 800), frame(1280, 800, pts), 1280, 800), { copy: null, rects: [{ x: 1, y: 1, w: 1217, h: 769 }] });
});

t.test('a vertical scroll is a copy of the viewer\'s pixels plus the newly exposed strip', async (t) => {
  // 256x256; the content moves up by 10 rows (scrolling down the page).
  t.same(diffFrames(striped(256, 256, 0), striped(256, 256, 10), 256, 256), {
    copy: { sx: 0, sy: 10, x: 0, y: 0, w: 256, h: 246 },
    rects: [{ x: 0, y: 246, w: 256, h: 10 }],
  });
  // And back down by 20 rows (scrolling up): the strip at the top is new.
  t.same(diffFrames(striped(256, 256, 20), striped(256, 256, 0), 256, 256), {
    copy: { sx: 0, sy: 0, x: 0, y: 20, w: 256, h: 236 },
    rects: [{ x: 0, y: 0, w: 256, h: 20 }],
  });
  // A change that is no scroll (a flat colour everywhere): plain rectangles.
  t.same(diffFrames(striped(256, 256, 0), frame(256, 256), 256, 256), { copy: null, rects: [{ x: 0, y: 0, w: 256, h: 256 }] });
});

t.test('a scroll under a static band (a browser\'s bar) copies only the rows that moved', async (t) => {
  // Rows 0-19 a static header (distinct rows of their own); below it the page, moved up by 10 rows.
  const page = (offset: number) => {
    const b = striped(256, 256, 0);
    striped(256, 236, 1000 + offset).copy(b, 20 * 256 * 3);
    striped(256, 20, 5000).copy(b, 0);
    return b;
  };
  t.same(diffFrames(page(0), page(10), 256, 256), {
    copy: { sx: 0, sy: 30, x: 0, y: 20, w: 256, h: 226 },
    rects: [{ x: 0, y: 246, w: 256, h: 10 }],
  });
});

/**
 * A 256x256 frame with a scrollbar drawn over columns 244-255: a grey track, its thumb (darker) at rows
 * [top, top + length), and `arrows` rows of black at its top and bottom.
 */
function withScrollbar(b: Buffer, opts: { thumb: [number, number]; arrows: number }): Buffer {
  const [top, length] = opts.thumb;
  for (let y = 0; y < 256; y++) {
    const v = y < opts.arrows || y >= 256 - opts.arrows ? 0 : y >= top && y < top + length ? 0x40 : 0x80;
    for (let x = 244; x < 256; x++) b.fill(v, (y * 256 + x) * 3, (y * 256 + x + 1) * 3);
  }
  return b;
}

t.test('a scroll sends the moving scrollbar thumb and the pointer as narrow rectangles, not their 64-pixel tile columns', async (t) => {
  // 256x256: the page (scrolled by `offset` rows), a scrollbar in columns 244-255 (grey, its thumb darker,
  // rows 50 + offset / 2 to 40 further), and a 5x20 black pointer fixed at x 126-130 (straddling the tile
  // columns 64-127 and 128-191), y 150-169.
  const screen = (offset: number) => {
    const b = withScrollbar(striped(256, 256, offset), { thumb: [50 + offset / 2, 40], arrows: 0 });
    for (let y = 150; y < 170; y++) b.fill(0, (y * 256 + 126) * 3, (y * 256 + 131) * 3);
    return b;
  };
  t.same(diffFrames(screen(0), screen(10), 256, 256), {
    // The scrollbar does not move with the page: it is left out of the copy (fitCopy).
    copy: { sx: 0, sy: 10, x: 0, y: 0, w: 244, h: 246 },
    rects: [
      // The thumb: at rows 50-89, now at 55-94.
      { x: 244, y: 50, w: 12, h: 45 },
      // The pointer: copied up to rows 140-159, drawn again at 150-169.
      { x: 126, y: 140, w: 5, h: 30 },
      // The exposed strip of the page, without the scrollbar's unchanged track.
      { x: 0, y: 246, w: 244, h: 10 },
    ],
  });
});

t.test('a scroll beside a scrollbar whose arrows stay put: the copy leaves the scrollbar out and covers every page row that moved', async (t) => {
  // 256x256: the page in columns 0-243 (scrolled by `offset` rows), a scrollbar in columns 244-255: a grey
  // track, arrows (black) in rows 0-11 and 244-255 that never move, and a thumb (dark grey) at rows
  // 14 + offset / 2 to 30 further — near the top, as on a long page. With whole-row matching alone the
  // copy stopped where the scrollbar's column stopped agreeing with the moved page (rows 19-233 here),
  // and the page rows above and below it were painted again in full.
  const screen = (offset: number) => withScrollbar(striped(256, 256, offset), { thumb: [14 + offset / 2, 30], arrows: 12 });
  t.same(diffFrames(screen(0), screen(10), 256, 256), {
    copy: { sx: 0, sy: 10, x: 0, y: 0, w: 244, h: 246 },
    rects: [
      // The thumb: at rows 14-43, now at 19-48.
      { x: 244, y: 14, w: 12, h: 35 },
      // The exposed strip of the page, and nothing else of it.
      { x: 0, y: 246, w: 244, h: 10 },
    ],
  });
  // Scrolling back up: the same, the strip at the top.
  t.same(diffFrames(screen(10), screen(0), 256, 256), {
    copy: { sx: 0, sy: 0, x: 0, y: 10, w: 244, h: 246 },
    rects: [{ x: 0, y: 0, w: 256, h: 49 }],
  });
});

t.test('a static mark in a gutter at the left is left out of the copy too', async (t) => {
  // 256x256: a grey gutter in columns 0-7 with a black mark at rows 100-109 that stays put (a breakpoint,
  // a bookmark), the page in columns 8-255 scrolled by 10 rows. Copied along, the mark would move to rows
  // 90-99 and need painting back at both places.
  const screen = (offset: number) => {
    const b = striped(256, 256, offset);
    for (let y = 0; y < 256; y++) b.fill(y >= 100 && y < 110 ? 0 : 0x80, y * 256 * 3, (y * 256 + 8) * 3);
    return b;
  };
  t.same(diffFrames(screen(0), screen(10), 256, 256), {
    copy: { sx: 8, sy: 10, x: 8, y: 0, w: 248, h: 246 },
    rects: [{ x: 8, y: 246, w: 248, h: 10 }],
  });
});

class Sink extends Writable {
  chunks: Buffer[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void) {
    this.chunks.push(chunk);
    cb();
  }
  messages() {
    return new ScreenStreamDecoder().push(Buffer.concat(this.chunks));
  }
}

t.test('the stream sends a key frame, then deltas, then a key frame again once the deltas outweigh a full-quality one three times', async (t) => {
  let n = 0;
  const src = {
    isUp: true,
    state: { width: 130, height: 70, up: true, resizable: true },
    // Every capture moves one red pixel along the bottom tile row: a 2x1 area changes each time.
    async capture() {
      const x = 3 + (n++ % 120);
      return { width: 130, height: 70, rgb: frame(130, 70, [[x, 66]]) };
    },
    releaseFrame() {},
    onChange: () => () => {},
  };
  const out = new Sink();
  const stop = runScreenStream(src as unknown as StreamSource, out, { format: 'jpeg', quality: 50, fps: 30, encoding: 'tiles' });
  t.teardown(stop);
  await waitFor(() => out.messages().filter((m) => m.header.type === 'frame').length >= 2);
  stop();
  const msgs = out.messages().filter((m) => m.header.type !== 'keepalive');
  t.equal(msgs[0]!.header.type, 'status');
  t.equal(msgs[1]!.header.type, 'frame', 'a key frame first');
  const firstTiles = msgs.find((m) => m.header.type === 'tiles');
  t.ok(firstTiles, 'then deltas');
  if (firstTiles?.header.type === 'tiles') {
    t.equal(firstTiles.header.copy, null);
    t.same(firstTiles.header.rects.map(({ x, y, w, h }) => ({ x, y, w, h })), [{ x: 3, y: 66, w: 2, h: 1 }], 'only the changed pixels (the red one moved from x 3 to 4)');
  }
  // Each key frame after the first comes once the deltas since the previous one outweigh the first — at the
  // stream's quality: a stream's first tick is never in motion — three times, never before. The later ones
  // fall due in motion (every capture changes), so they are sent at the motion quality: smaller.
  const key = msgs[1]!.header.bytes;
  let since = 0;
  for (const m of msgs.slice(2)) {
    if (m.header.type === 'frame') {
      t.ok(since > 3 * key, `key frame after ${since} delta bytes > 3 x ${key}`);
      t.ok(m.header.bytes < key, `a key frame in motion (${m.header.bytes} B) is smaller than the first (${key} B)`);
      since = 0;
    } else if (m.header.type === 'tiles') {
      t.ok(since <= 3 * key, 'a delta only while the deltas so far do not outweigh the key frame three times');
      since += m.header.bytes;
    }
  }
});

t.test('a key frame due in motion is sent at the motion quality, and the whole screen again at full quality, as a key frame, once still', async (t) => {
  // Four captures of a flat 64x64 screen, each a different grey (every one repaints everything, so every one
  // is a key frame), then still. The third and fourth changed ticks are in motion (refine.ts).
  const greys = [10, 60, 110, 160];
  const flat = (v: number) => Buffer.alloc(64 * 64 * 3, v);
  let n = 0;
  const src = {
    isUp: true,
    state: { width: 64, height: 64, up: true, resizable: true },
    async capture() {
      return { width: 64, height: 64, rgb: flat(greys[Math.min(n++, greys.length - 1)]!) };
    },
    releaseFrame() {},
    onChange: () => () => {},
  };
  const out = new Sink();
  const stop = runScreenStream(src as unknown as StreamSource, out, { format: 'jpeg', quality: 80, fps: 30, encoding: 'tiles' });
  t.teardown(stop);
  const sent = () => out.messages().filter((m) => m.header.type === 'frame' || m.header.type === 'tiles');
  await waitFor(() => sent().length >= 5);
  stop();
  const jpeg = (v: number, q: number) => encodeRgb(flat(v), 64, 64, 'jpeg', q);
  t.same(sent().map((m) => m.header.type), ['frame', 'frame', 'frame', 'frame', 'frame']);
  t.same(sent().map((m) => m.payload), [await jpeg(10, 80), await jpeg(60, 80), await jpeg(110, 40), await jpeg(160, 40), await jpeg(160, 80)],
    'quality 80, 80, then 40 in motion, then the last picture again at 80');
});

t.test('in motion the stream sends lower-quality deltas, then the same area again at full quality once still', async (t) => {
  // A 256x256 page scrolled by 10 rows a capture four times, then still: the key frame and the first
  // delta are the first two changed ticks, the deltas to offsets 20, 30 and 40 are in motion (refine.ts).
  const offsets = [0, 10, 20, 30, 40];
  let n = 0;
  const src = {
    isUp: true,
    state: { width: 256, height: 256, up: true, resizable: true },
    async capture() {
      return { width: 256, height: 256, rgb: striped(256, 256, offsets[Math.min(n++, offsets.length - 1)]!) };
    },
    releaseFrame() {},
    onChange: () => () => {},
  };
  const out = new Sink();
  const stop = runScreenStream(src as unknown as StreamSource, out, { format: 'jpeg', quality: 80, fps: 30, encoding: 'tiles' });
  t.teardown(stop);
  const deltas = () => out.messages().flatMap((m) => (m.header.type === 'tiles' ? [m.header] : []));
  await waitFor(() => deltas().length >= 5);
  stop();
  const got = deltas().map((h) => ({ copy: h.copy, rects: h.rects.map(({ x, y, w, h }) => ({ x, y, w, h })) }));
  const scroll = { copy: { sx: 0, sy: 10, x: 0, y: 0, w: 256, h: 246 }, rects: [{ x: 0, y: 246, w: 256, h: 10 }] };
  // The strips painted in motion moved up with each copy: rows 226-255 hold low-quality pixels.
  t.same(got, [scroll, scroll, scroll, scroll, { copy: null, rects: [{ x: 0, y: 226, w: 256, h: 30 }] }]);
  const bytes = deltas().map((h) => h.rects[0]!.bytes);
  t.ok(bytes[1]! < bytes[0]!, `a strip in motion (${bytes[1]} B) is smaller than a like strip at full quality (${bytes[0]} B)`);
});

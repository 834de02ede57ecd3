/**
 * Attack: a guest that replaces its agent writes hostile screen-stream framing. Before the fix a
 * negative or non-numeric `bytes` made ScreenStreamDecoder.push spin forever (the whole control plane,
 * every tenant, hung). Every violation must throw at once and poison the decoder; valid streams split
 * anywhere still decode byte-exactly.
 */
import t, { type Test } from 'tap';
import { MAX_SCREEN_FRAME_BYTES, ScreenStreamDecoder, ScreenStreamError, encodeScreenMessage } from '../../shared/agent-protocol.js';

/** A frame with any header at all (what a hostile agent can send). */
function raw(header: unknown, payload = Buffer.alloc(0)): Buffer {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length, 0);
  return Buffer.concat([len, json, payload]);
}

const FRAME = { type: 'frame', seq: 0, format: 'jpeg', width: 1280, height: 800, captured_at: 1763800000000 };

function refuses(t: Test, chunks: Buffer[], what: string): void {
  const d = new ScreenStreamDecoder();
  let err: unknown = null;
  try {
    for (const c of chunks) d.push(c);
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof ScreenStreamError, `${what}: refused`);
  t.throws(() => d.push(encodeScreenMessage({ type: 'keepalive', bytes: 0 })), ScreenStreamError, `${what}: the decoder stays broken`);
}

t.test('hostile lengths are refused at once, never looped on or buffered', async (t) => {
  refuses(t, [raw({ ...FRAME, bytes: -10 }, Buffer.alloc(20))], 'negative bytes');
  // the exact rewind of the old decoder: total = 0, so the same message forever
  const h = JSON.stringify({ ...FRAME, bytes: 0 });
  refuses(t, [raw({ ...FRAME, bytes: -(4 + Buffer.byteLength(h) + 1) })], 'bytes rewinding to the start');
  refuses(t, [raw({ ...FRAME, bytes: 'NaN' })], 'non-numeric bytes');
  refuses(t, [raw({ ...FRAME, bytes: null })], 'null bytes');
  refuses(t, [raw({ ...FRAME, bytes: 1.5 }, Buffer.alloc(2))], 'fractional bytes');
  refuses(t, [raw({ ...FRAME, bytes: MAX_SCREEN_FRAME_BYTES + 1 })], 'a frame larger than the bound');
  refuses(t, [raw({ ...FRAME, bytes: 2 ** 53 })], 'a huge frame');
  refuses(t, [raw({ type: 'keepalive', bytes: 5 }, Buffer.alloc(5))], 'a keepalive with a payload');
  refuses(t, [raw({ type: 'status', up: true, width: 1e9, height: 800, bytes: 0 })], 'an absurd display size');
  refuses(t, [raw({ type: 'shell', bytes: 0 })], 'an unknown message type');
  refuses(t, [raw('{"type":"frame",')], 'a header that is not JSON');
  const huge = Buffer.alloc(4);
  huge.writeUInt32BE(0xffffffff, 0);
  refuses(t, [huge], 'header length 2^32-1');
  refuses(t, [Buffer.from([0, 0, 0, 0])], 'header length 0');
});

t.test('hostile tiles (deltas) are refused: every rectangle within the frame, sizes adding up, bounded', async (t) => {
  const T = { type: 'tiles', seq: 1, format: 'jpeg', width: 1280, height: 800, captured_at: 1763800000000, copy: null };
  const rect = { x: 0, y: 0, w: 64, h: 64, bytes: 10 };
  const ok = raw({ ...T, rects: [rect], bytes: 10 }, Buffer.alloc(10));
  t.same(new ScreenStreamDecoder().push(ok).map((m) => m.header.type), ['tiles'], 'a valid delta decodes');
  refuses(t, [raw({ ...T, rects: [{ ...rect, x: 1240 }], bytes: 10 }, Buffer.alloc(10))], 'a rectangle past the right edge');
  refuses(t, [raw({ ...T, rects: [{ ...rect, y: 760 }], bytes: 10 }, Buffer.alloc(10))], 'a rectangle past the bottom');
  refuses(t, [raw({ ...T, rects: [{ ...rect, x: -64 }], bytes: 10 }, Buffer.alloc(10))], 'a negative offset');
  refuses(t, [raw({ ...T, rects: [{ ...rect, w: 0 }], bytes: 10 }, Buffer.alloc(10))], 'an empty rectangle');
  refuses(t, [raw({ ...T, rects: [{ ...rect, w: 2 ** 40 }], bytes: 10 }, Buffer.alloc(10))], 'a huge rectangle');
  refuses(t, [raw({ ...T, rects: [rect, rect], bytes: 10 }, Buffer.alloc(10))], 'sizes that do not add up to the payload');
  refuses(t, [raw({ ...T, rects: [{ ...rect, bytes: 0 }], bytes: 0 })], 'a rectangle without an image');
  refuses(t, [raw({ ...T, rects: Array.from({ length: 65 }, () => ({ ...rect, bytes: 1 })), bytes: 65 }, Buffer.alloc(65))], 'more than 64 rectangles');
  refuses(t, [raw({ ...T, rects: [], bytes: 0 })], 'a delta with nothing in it');
  refuses(t, [raw({ ...T, rects: [{ ...rect, src: '/etc/passwd' }], bytes: 10 }, Buffer.alloc(10))], 'an unknown field in a rectangle');
  refuses(t, [raw({ ...T, copy: { sx: 0, sy: 790, x: 0, y: 0, w: 1280, h: 20 }, rects: [], bytes: 0 })], 'a copy from outside the frame');
  refuses(t, [raw({ ...T, copy: { sx: 0, sy: 0, x: 1, y: 0, w: 1280, h: 20 }, rects: [], bytes: 0 })], 'a copy to outside the frame');
  t.same(new ScreenStreamDecoder().push(raw({ ...T, copy: { sx: 0, sy: 10, x: 0, y: 0, w: 1280, h: 790 }, rects: [], bytes: 0 })).map((m) => m.header.type), ['tiles'],
    'a scroll that exposes nothing new decodes');
});

t.test('truncated and split streams wait for the rest and decode exactly', async (t) => {
  const payload = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 251));
  const stream = Buffer.concat([
    encodeScreenMessage({ type: 'status', up: true, width: 1280, height: 800, bytes: 0 }),
    encodeScreenMessage({ type: 'frame', seq: 7, format: 'jpeg', width: 1280, height: 800, captured_at: 1763800000000, bytes: payload.length }, payload),
    encodeScreenMessage({ type: 'keepalive', bytes: 0 }),
  ]);
  // one byte at a time
  const d = new ScreenStreamDecoder();
  const got: Array<{ type: string; len: number }> = [];
  for (let i = 0; i < stream.length; i++) for (const m of d.push(stream.subarray(i, i + 1))) got.push({ type: m.header.type, len: m.payload.length });
  t.same(got, [{ type: 'status', len: 0 }, { type: 'frame', len: 3000 }, { type: 'keepalive', len: 0 }]);
  // truncated mid-payload: nothing yet, then the rest
  const d2 = new ScreenStreamDecoder();
  t.same(d2.push(stream.subarray(0, 100)).map((m) => m.header.type), ['status'], 'the status before the cut');
  t.same(d2.push(stream.subarray(100, 2000)), [], 'a truncated frame is held, not returned');
  const rest = d2.push(stream.subarray(2000));
  t.same(rest.map((m) => m.header.type), ['frame', 'keepalive']);
  t.ok(rest[0]!.payload.equals(payload), 'the payload is byte-exact');
  // a hostile header arriving split across chunks is refused once it is whole
  const bad = raw({ ...FRAME, bytes: -1 });
  refuses(t, [bad.subarray(0, 3), bad.subarray(3, 9), bad.subarray(9)], 'a split hostile header');
});

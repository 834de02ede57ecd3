/** Pixel conversion and XWD parsing in isolation, against a naive reference. */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { SimdConverter, bgrxToRgb, encodeRgb, parseXwdHeader } from '../../agent/src/desktop/screen.js';

function reference(src: Buffer, stride: number, width: number, height: number): Buffer {
  const out = Buffer.alloc(width * height * 3);
  let o = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * stride + x * 4;
      out[o++] = src[i + 2]!;
      out[o++] = src[i + 1]!;
      out[o++] = src[i]!;
    }
  }
  return out;
}

const shapes: Array<[number, number, number]> = [
  // width, height, stride in pixels
  [1, 1, 1],
  [3, 2, 8],
  [4, 4, 4],
  [5, 3, 7],
  [17, 9, 64],
  [1001, 37, 2560],
  [1280, 20, 1280],
];

t.test('JS conversion matches the reference', async (t) => {
  for (const [w, h, sp] of shapes) {
    const src = randomBytes(sp * 4 * h);
    t.ok(bgrxToRgb(src, sp * 4, w, h).equals(reference(src, sp * 4, w, h)), `${w}x${h} stride ${sp}`);
    // An unaligned source takes the byte-wise path.
    const shifted = Buffer.concat([Buffer.alloc(1), src]).subarray(1);
    t.ok(bgrxToRgb(shifted, sp * 4, w, h).equals(reference(src, sp * 4, w, h)), `${w}x${h} unaligned`);
  }
});

t.test('SIMD conversion matches the reference, reusing its memory', async (t) => {
  const simd = SimdConverter.create();
  t.ok(simd, 'WebAssembly SIMD is available on Node 20');
  for (const [w, h, sp] of [...shapes, ...shapes.reverse()]) {
    const src = randomBytes(sp * 4 * h);
    const need = sp * 4 * (h - 1) + w * 4;
    const view = simd!.rawView(need, w, h);
    src.copy(view, 0, 0, need);
    const into = Buffer.alloc(w * h * 3, 0xee);
    const out = simd!.convert(need, sp * 4, w, h, into);
    t.equal(out, into, 'writes into the given buffer');
    t.ok(out.equals(reference(src, sp * 4, w, h)), `${w}x${h} stride ${sp}`);
  }
});

t.test('XWD header parsing', async (t) => {
  const b = Buffer.alloc(100);
  const put = (i: number, v: number) => b.writeUInt32BE(v, i * 4);
  put(0, 160);
  put(1, 7);
  put(4, 2560);
  put(5, 1600);
  put(7, 0);
  put(11, 32);
  put(12, 10240);
  put(14, 0xff0000);
  put(15, 0xff00);
  put(16, 0xff);
  put(19, 256);
  const h = parseXwdHeader(b);
  t.match(h, { width: 2560, height: 1600, bitsPerPixel: 32, bytesPerLine: 10240, pixelOffset: 160 + 256 * 12 });
  put(1, 6);
  t.throws(() => parseXwdHeader(b), /version 7/);
  t.throws(() => parseXwdHeader(Buffer.alloc(10)), /truncated/);
});

t.test('the encoder keeps no libvips operation cache (frames never repeat; it only held memory)', async (t) => {
  const rgb = Buffer.alloc(64 * 48 * 3, 0x80);
  await encodeRgb(rgb, 64, 48, 'jpeg', 80);
  await encodeRgb(rgb, 64, 48, 'png', 100);
  const c = sharp.cache();
  t.same({ memory: c.memory.max, files: c.files.max, items: c.items.max, held: c.items.current }, { memory: 0, files: 0, items: 0, held: 0 });
});

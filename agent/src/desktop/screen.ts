/**
 * Screen capture from the Xvfb `-fbdir` framebuffer file, and image encoding. The only module that
 * imports sharp.
 *
 * Xvfb keeps its screen as an XWD file that it updates in place (a shared mapping), so a capture
 * is a plain file read: no X round trip, no process spawn. The file always has the size Xvfb was
 * started with; after an xrandr mode switch the visible screen is the top-left corner of it.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type SharpFn from 'sharp';
import type { ScreenshotView } from '../../../shared/schemas/display.js';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

// sharp takes ~80 ms to load (mostly its JS dependencies), the largest part of the agent's start: it is
// loaded on first use, or by preloadEncoder once the agent listens, not at import. Its CommonJS
// entry can be required synchronously, so encoders stay plain calls.
const requireCjs = createRequire(import.meta.url);
let sharpModule: typeof SharpFn | null = null;
function sharp(): typeof SharpFn {
  if (!sharpModule) {
    const s = requireCjs('sharp') as typeof SharpFn;
    // One encode at a time per call is what the agent needs; libvips' own thread pool would only fight
    // the X server and the guest's applications for the machine's few cores.
    s.concurrency(1);
    // libvips' operation cache (default 50 MB, 100 operations) keeps recent encodes and the frames they
    // read; a screen's frames never repeat, so it only held memory in an idle machine (docs/guest-image.md).
    s.cache(false);
    sharpModule = s;
  }
  return sharpModule;
}

/** Load the image encoder now (it is otherwise loaded by the first encode). */
export function preloadEncoder(): void {
  sharp();
}

export interface XwdHeader {
  headerSize: number;
  width: number;
  height: number;
  bitsPerPixel: number;
  bytesPerLine: number;
  ncolors: number;
  byteOrder: number;
  redMask: number;
  greenMask: number;
  blueMask: number;
  /** Offset of the first pixel in the file. */
  pixelOffset: number;
}

const XWD_HEADER_FIXED = 100;

export function parseXwdHeader(b: Buffer): XwdHeader {
  if (b.length < XWD_HEADER_FIXED) throw new Error('XWD header is truncated');
  const u = (i: number) => b.readUInt32BE(i * 4);
  const h: XwdHeader = {
    headerSize: u(0),
    width: u(4),
    height: u(5),
    byteOrder: u(7),
    bitsPerPixel: u(11),
    bytesPerLine: u(12),
    redMask: u(14),
    greenMask: u(15),
    blueMask: u(16),
    ncolors: u(19),
    pixelOffset: 0,
  };
  if (u(1) !== 7) throw new Error('not an XWD version 7 file');
  h.pixelOffset = h.headerSize + h.ncolors * 12;
  return h;
}

/** Whether pixels are 32-bit words 0x00RRGGBB stored little-endian (B, G, R, X in memory). */
function isBgrx(h: XwdHeader): boolean {
  return h.bitsPerPixel === 32 && h.byteOrder === 0 && h.redMask === 0xff0000 && h.greenMask === 0xff00 && h.blueMask === 0xff;
}

/**
 * BGRX → RGB with WebAssembly SIMD: one i8x16.swizzle turns 4 pixels (16 bytes) into 12 bytes.
 * 0.3 ms instead of 2.5 ms in JS for 1280x800, which is most of a screenshot's cost above the
 * encode itself. The module is small enough to be written out here:
 *
 *   (func (export "row") (param $src i32) (param $dst i32) (param $quads i32)
 *     (block (loop
 *       (br_if 1 (i32.eqz (local.get $quads)))
 *       (v128.store (local.get $dst) (i8x16.swizzle (v128.load (local.get $src)) (v128.const MASK)))
 *       ;; each store writes 4 bytes past the 12 it means: the next quad, the next row or the slack
 *       ;; at the end of the output overwrite or absorb them
 *       (local.set $src (i32.add (local.get $src) (i32.const 16)))
 *       (local.set $dst (i32.add (local.get $dst) (i32.const 12)))
 *       (local.set $quads (i32.sub (local.get $quads) (i32.const 1)))
 *       (br 0))))
 *   (memory (export "mem") 1)
 */
const SWIZZLE_MASK = [2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, 0x80, 0x80, 0x80, 0x80];
const ROW_BODY = [
  0x00, // no locals
  0x02, 0x40, 0x03, 0x40, // block, loop
  0x20, 0x02, 0x45, 0x0d, 0x01, // br_if 1 (i32.eqz quads)
  0x20, 0x01, // dst
  0x20, 0x00, 0xfd, 0x00, 0x00, 0x00, // v128.load src
  0xfd, 0x0c, ...SWIZZLE_MASK, // v128.const
  0xfd, 0x0e, // i8x16.swizzle
  0xfd, 0x0b, 0x00, 0x00, // v128.store
  0x20, 0x00, 0x41, 0x10, 0x6a, 0x21, 0x00, // src += 16
  0x20, 0x01, 0x41, 0x0c, 0x6a, 0x21, 0x01, // dst += 12
  0x20, 0x02, 0x41, 0x01, 0x6b, 0x21, 0x02, // quads -= 1
  0x0c, 0x00, // br 0
  0x0b, 0x0b, 0x0b, // end loop, block, func
];
const section = (id: number, bytes: number[]) => [id, bytes.length, ...bytes];
const SIMD_MODULE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  ...section(1, [0x01, 0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00]), // type: (i32 i32 i32) -> ()
  ...section(3, [0x01, 0x00]), // one function of type 0
  ...section(5, [0x01, 0x00, 0x01]), // one memory, 1 page to start
  ...section(7, [0x02, 0x03, 0x72, 0x6f, 0x77, 0x00, 0x00, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x00]), // export row, mem
  ...section(10, [0x01, ROW_BODY.length, ...ROW_BODY]),
]);

const OUT_SLACK = 16;

// The project's TypeScript lib (ES2022, no DOM) does not describe WebAssembly; Node 20 has it.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
declare const WebAssembly: {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
};

/** Raw rows are read straight into the module's memory, converted there and copied out. */
export class SimdConverter {
  private readonly mem: WasmMemory;
  private readonly row: (src: number, dst: number, quads: number) => void;

  private constructor(instance: { exports: Record<string, unknown> }) {
    this.mem = instance.exports.mem as WasmMemory;
    this.row = instance.exports.row as (src: number, dst: number, quads: number) => void;
  }

  /** null where WebAssembly SIMD is unavailable (the JS conversion is used then). */
  static create(): SimdConverter | null {
    try {
      if (!WebAssembly.validate(SIMD_MODULE)) return null;
      return new SimdConverter(new WebAssembly.Instance(new WebAssembly.Module(SIMD_MODULE)));
    } catch {
      return null;
    }
  }

  /**
   * A view of `rawBytes` at the start of the module's memory, with room after it for the output.
   * Valid until the next call (growing the memory detaches older views).
   */
  rawView(rawBytes: number, width: number, height: number): Buffer {
    const total = rawBytes + width * height * 3 + OUT_SLACK;
    const have = this.mem.buffer.byteLength;
    if (have < total) this.mem.grow(Math.ceil((total - have) / 65536));
    return Buffer.from(this.mem.buffer, 0, rawBytes);
  }

  /** Convert what rawView's buffer holds; the result is a copy (into `into` when it fits). */
  convert(rawBytes: number, stride: number, width: number, height: number, into?: Buffer): Buffer {
    const out = rawBytes;
    const quads = width >> 2;
    const rowBytes = width * 3;
    for (let y = 0; y < height; y++) this.row(y * stride, out + y * rowBytes, quads);
    const mem = Buffer.from(this.mem.buffer);
    if (quads * 4 < width) {
      for (let y = 0; y < height; y++) {
        let o = out + y * rowBytes + quads * 12;
        for (let x = quads * 4, i = y * stride + x * 4; x < width; x++, i += 4) {
          mem[o++] = mem[i + 2]!;
          mem[o++] = mem[i + 1]!;
          mem[o++] = mem[i]!;
        }
      }
    }
    const size = width * height * 3;
    const dst = into && into.length === size ? into : Buffer.allocUnsafe(size);
    mem.copy(dst, 0, out, out + size);
    return dst;
  }
}

export interface RawFrame {
  width: number;
  height: number;
  /** Packed RGB, width * height * 3 bytes. */
  rgb: Buffer;
}

/**
 * Reads the visible part of the framebuffer. A capture opens the file each time: when Xvfb is
 * restarted it creates a new file, and a kept descriptor would keep showing the dead one.
 */
export class FramebufferReader {
  private readonly file: string;
  private raw: Buffer = Buffer.alloc(0);
  /** Captures share `raw` and the SIMD module's memory, so they run one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Released RGB buffers: writing into memory already touched is ~1 ms cheaper than a fresh 3 MB. */
  private pool: Buffer[] = [];
  private readonly simd = SimdConverter.create();

  constructor(fbdir: string) {
    this.file = path.join(fbdir, 'Xvfb_screen0');
  }

  exists(): boolean {
    return fs.existsSync(this.file);
  }

  /** Capture the top-left `width` x `height` of the screen as packed RGB. */
  capture(width: number, height: number): Promise<RawFrame> {
    const run = this.queue.then(() => this.captureNow(width, height));
    this.queue = run.catch(() => {});
    return run;
  }

  /** Hand a frame's buffer back for reuse; the caller must not touch `frame.rgb` afterwards. */
  release(frame: RawFrame): void {
    if (this.pool.length < 2) this.pool.push(frame.rgb);
  }

  private async captureNow(width: number, height: number): Promise<RawFrame> {
    // Synchronous on purpose: Xvfb maps the file shared, so it is in the page cache, and a 1280x800 read is
    // ~0.5 ms, less than the four thread-pool round trips of the async calls.
    const fd = fs.openSync(this.file, 'r');
    try {
      const head = Buffer.alloc(XWD_HEADER_FIXED);
      fs.readSync(fd, head, 0, XWD_HEADER_FIXED, 0);
      const h = parseXwdHeader(head);
      if (!isBgrx(h)) throw new Error('unsupported framebuffer pixel format');
      if (width > h.width || height > h.height) throw new Error('mode is larger than the framebuffer');
      // Only the rows of the current mode are read; the rest of the file is the unused screen.
      const need = h.bytesPerLine * (height - 1) + width * 4;
      const size = width * height * 3;
      let into: Buffer | undefined;
      while (this.pool.length && !into) {
        const b = this.pool.pop()!;
        if (b.length === size) into = b;
      }
      if (this.simd) {
        const raw = this.simd.rawView(need, width, height);
        const bytesRead = fs.readSync(fd, raw, 0, need, h.pixelOffset);
        if (bytesRead < need) throw new Error('framebuffer file is truncated');
        return { width, height, rgb: this.simd.convert(need, h.bytesPerLine, width, height, into) };
      }
      if (this.raw.length < need) this.raw = Buffer.allocUnsafeSlow(h.bytesPerLine * height);
      const bytesRead = fs.readSync(fd, this.raw, 0, need, h.pixelOffset);
      if (bytesRead < need) throw new Error('framebuffer file is truncated');
      return { width, height, rgb: bgrxToRgb(this.raw, h.bytesPerLine, width, height, into) };
    } finally {
      fs.closeSync(fd);
    }
  }
}

/**
 * BGRX rows → packed RGB in plain JS (the fallback without WebAssembly SIMD). Four pixels at a
 * time become three 32-bit words, about 1.5x faster than byte stores (2.5 ms for 1280x800).
 */
export function bgrxToRgb(src: Buffer, stride: number, width: number, height: number, into?: Buffer): Buffer {
  const out = into && into.length === width * height * 3 ? into : Buffer.allocUnsafe(width * height * 3);
  const aligned = src.byteOffset % 4 === 0 && stride % 4 === 0 && out.byteOffset % 4 === 0;
  if (!aligned) {
    let o = 0;
    for (let y = 0; y < height; y++) {
      let i = y * stride;
      for (let x = 0; x < width; x++, i += 4) {
        out[o++] = src[i + 2]!;
        out[o++] = src[i + 1]!;
        out[o++] = src[i]!;
      }
    }
    return out;
  }
  const u = new Uint32Array(src.buffer, src.byteOffset, Math.floor(src.length / 4));
  const rowWords = stride >> 2;
  const quads = width >> 2;
  let o = 0;
  for (let y = 0; y < height; y++) {
    let i = y * rowWords;
    let ob = o * 3;
    if (ob % 4 === 0) {
      const o32 = new Uint32Array(out.buffer, out.byteOffset + ob, quads * 3);
      let w = 0;
      for (let q = 0; q < quads; q++, i += 4) {
        const a = u[i]!, b = u[i + 1]!, c = u[i + 2]!, d = u[i + 3]!;
        o32[w++] = ((a >>> 16) & 255) | (a & 0xff00) | ((a & 255) << 16) | (((b >>> 16) & 255) << 24);
        o32[w++] = ((b >>> 8) & 255) | ((b & 255) << 8) | (c & 0xff0000) | (((c >>> 8) & 255) << 24);
        o32[w++] = (c & 255) | (((d >>> 16) & 255) << 8) | ((d & 0xff00) << 8) | ((d & 255) << 24);
      }
      ob += quads * 12;
    } else {
      for (let q = 0; q < quads * 4; q++, i++) {
        const v = u[i]!;
        out[ob++] = (v >>> 16) & 255;
        out[ob++] = (v >>> 8) & 255;
        out[ob++] = v & 255;
      }
    }
    for (let x = quads * 4; x < width; x++, i++) {
      const v = u[i]!;
      out[ob++] = (v >>> 16) & 255;
      out[ob++] = (v >>> 8) & 255;
      out[ob++] = v & 255;
    }
    o += width;
  }
  return out;
}

/**
 * Encode packed RGB. This is also the "encode floor" the benchmark compares screenshots against.
 * Settings were measured at 1280x800 on the host: PNG zlib level 1 is 2x faster than the default
 * for ~10% more bytes; WebP effort 0 is 3-4x faster than the default 4; JPEG uses sharp's defaults
 * (libjpeg-turbo, 4:2:0).
 */
export function encodeRgb(
  rgb: Buffer,
  width: number,
  height: number,
  format: ImageFormat,
  quality: number,
  view?: ScreenshotView | null,
): Promise<Buffer> {
  let img = sharp()(rgb, { raw: { width, height, channels: 3 } });
  if (view) {
    const r = view.region;
    if (r.x !== 0 || r.y !== 0 || r.width !== width || r.height !== height) img = img.extract({ left: r.x, top: r.y, width: r.width, height: r.height });
    if (view.width !== r.width || view.height !== r.height) img = img.resize(view.width, view.height, { fit: 'fill' });
  }
  switch (format) {
    case 'png':
      return img.png({ compressionLevel: 1, adaptiveFiltering: false }).toBuffer();
    case 'jpeg':
      return img.jpeg({ quality }).toBuffer();
    case 'webp':
      return img.webp({ quality, effort: 0 }).toBuffer();
  }
}

/** Decode an encoded image back to packed RGB (tests and diagnostics). */
export async function decodeToRgb(image: Buffer): Promise<RawFrame> {
  const { data, info } = await sharp()(image).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { width: info.width, height: info.height, rgb: data };
}

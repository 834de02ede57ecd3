/**
 * Lower quality during continuous motion, full quality once it settles (docs/gateway.md, "Screen
 * encodings"): the `tiles` stream encodes the deltas of a continuous change (a scroll, a drag) at a
 * lower quality, remembers which tiles of the viewer's picture hold such pixels, and once the screen
 * has been still for a moment sends those tiles again at the stream's quality — the "refinement" of
 * VNC-like viewers. A single change after a still screen (a keystroke, a click) is sent at full
 * quality at once, so input → visible never waits for a refinement.
 *
 * Pure state over the 64-pixel tile grid; the stream (stream.ts) does the capturing and encoding.
 */
import { groupRects, TILE, type CopyRect, type Rect } from './tiles.js';

/** The decisions, as data. */
export const MOTION = {
  /** A delta is "in motion" when this many consecutive ticks (this one included) each changed the screen. */
  changedTicks: 3,
  /** Quality during motion: the stream's quality times this, not below `minQuality`. */
  qualityFactor: 0.5,
  minQuality: 20,
  /** Refine once nothing changed for this long. */
  settleMs: 150,
} as const;

/** The quality to encode a delta in motion at, for a stream of quality `q`. */
export function motionQuality(q: number): number {
  return Math.min(q, Math.max(MOTION.minQuality, Math.round(q * MOTION.qualityFactor)));
}

/** Counts consecutive changed ticks and remembers when the screen last changed. */
export class Motion {
  private run = 0;
  private lastChangeAt = 0;

  /** A tick that changed the screen at `now`; whether it is in motion. */
  changed(now: number): boolean {
    this.run++;
    this.lastChangeAt = now;
    return this.run >= MOTION.changedTicks;
  }

  /** A tick that changed nothing at `now`; whether the screen has settled (still for `settleMs`). */
  still(now: number): boolean {
    this.run = 0;
    return now - this.lastChangeAt >= MOTION.settleMs;
  }
}

/**
 * Which parts of the viewer's picture were painted below full quality, per pixel row and 64-pixel tile
 * column (rows, because a scroll moves content by any number of rows, and a terminal line is 13 of
 * them). Conservative: a part is marked when any of its pixels may be low quality, and cleared only
 * when a full-quality paint or a copy replaces it whole; over-marking costs refinement bytes, never a
 * blurred area left behind.
 */
export class LowQualityTiles {
  private readonly cols: number;
  /** `height` rows of `cols` flags. */
  private mask: Uint8Array;

  constructor(
    private readonly width: number,
    private readonly height: number,
  ) {
    this.cols = Math.ceil(width / TILE);
    this.mask = new Uint8Array(this.cols * height);
  }

  get empty(): boolean {
    return !this.mask.includes(1);
  }

  /** The viewer copies its own pixels (a scroll): they keep their state where they land. */
  copy(c: CopyRect): void {
    const src = this.mask.slice();
    for (const tx of this.columns(c)) {
      const whole = this.spans(c, tx);
      for (let i = 0; i < c.h; i++) {
        const from = src[(c.sy + i) * this.cols + tx]!;
        const at = (c.y + i) * this.cols + tx;
        this.mask[at] = whole ? from : this.mask[at]! | from;
      }
    }
  }

  /** `r` was painted, below full quality or not. */
  paint(r: Rect, low: boolean): void {
    for (const tx of this.columns(r)) {
      if (!low && !this.spans(r, tx)) continue;
      for (let y = r.y; y < r.y + r.h; y++) this.mask[y * this.cols + tx] = low ? 1 : 0;
    }
  }

  /** The marked parts as rectangles (tiles.ts grouping), trimmed to their marked rows: to be sent again. */
  rects(): Rect[] {
    const rows = Math.ceil(this.height / TILE);
    const changed = new Array<boolean>(this.cols * rows).fill(false);
    for (let y = 0; y < this.height; y++) for (let tx = 0; tx < this.cols; tx++) if (this.mask[y * this.cols + tx]) changed[Math.floor(y / TILE) * this.cols + tx] = true;
    return groupRects({ cols: this.cols, rows, changed }, this.width, this.height).map((r) => {
      const marked = (y: number) => this.columns(r).some((tx) => this.mask[y * this.cols + tx]);
      let y0 = r.y;
      let y1 = r.y + r.h;
      while (y0 < y1 - 1 && !marked(y0)) y0++;
      while (y1 - 1 > y0 && !marked(y1 - 1)) y1--;
      return { x: r.x, y: y0, w: r.w, h: y1 - y0 };
    });
  }

  clear(): void {
    this.mask.fill(0);
  }

  /** The tile columns `r` touches. */
  private columns(r: Rect): number[] {
    const out: number[] = [];
    for (let tx = Math.floor(r.x / TILE); tx * TILE < r.x + r.w && tx < this.cols; tx++) out.push(tx);
    return out;
  }

  /** Whether `r` spans tile column `tx` from edge to edge. */
  private spans(r: Rect, tx: number): boolean {
    return r.x <= tx * TILE && r.x + r.w >= Math.min(this.width, (tx + 1) * TILE);
  }
}

/**
 * Frame differencing for the screen stream's `tiles` encoding (docs/gateway.md, "Screen encodings"):
 * which parts of a packed-RGB frame changed since the previous one, as a few rectangles on a 64-pixel
 * grid, and whether the change is a vertical scroll that the viewer can replay by copying pixels it
 * already has. Pure functions over buffers; the stream (stream.ts) encodes the rectangles.
 *
 * Invariant: a delta is exact with respect to what the viewer holds. The viewer applies `copy` to its
 * picture (a copy of its own pixels) and then paints `rects`; every rectangle is computed against the
 * previous frame *with the copy applied*, so a wrong scroll guess costs bytes, never a wrong picture.
 */

export const TILE = 64;
/** More rectangles than this are sent as their bounding box (keeps the header far below its 4 KiB bound). */
export const MAX_RECTS = 48;
/** A scroll is only used when at least this many rows agree on the offset. */
const MIN_SCROLL_VOTES = 16;
/** How many columns at each side of a scroll copy may be found not to move with it (a scrollbar: fitCopy). */
export const COPY_EDGE_COLUMNS = TILE;

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** Copy the viewer's own pixels at (sx, sy, w, h) to (x, y): a scroll. */
export interface CopyRect extends Rect {
  sx: number;
  sy: number;
}

export interface Delta {
  copy: CopyRect | null;
  /** To be painted (in order) after the copy, from the new frame's pixels. */
  rects: Rect[];
}

/**
 * One flag per tile (row-major, `cols` per row): whether any pixel in it differs. Row by row: one
 * `compare` of the whole row first (most rows are equal, even mid-scroll once the copy is applied),
 * then a compare per tile not yet known to have changed.
 */
export function changedTiles(prev: Buffer, cur: Buffer, width: number, height: number): { cols: number; rows: number; changed: boolean[] } {
  const cols = Math.ceil(width / TILE);
  const rows = Math.ceil(height / TILE);
  const changed = new Array<boolean>(cols * rows).fill(false);
  const stride = width * 3;
  for (let y = 0; y < height; y++) {
    const o = y * stride;
    if (prev.compare(cur, o, o + stride, o, o + stride) === 0) continue;
    const t0 = Math.floor(y / TILE) * cols;
    for (let tx = 0; tx < cols; tx++) {
      if (changed[t0 + tx]) continue;
      const a = o + tx * TILE * 3;
      const b = o + Math.min(width, (tx + 1) * TILE) * 3;
      if (prev.compare(cur, a, b, a, b) !== 0) changed[t0 + tx] = true;
    }
  }
  return { cols, rows, changed };
}

/**
 * Changed tiles as rectangles: runs of changed tiles in a tile row, merged downwards with the run of
 * the row above when they span the same columns. Clipped to the frame; more than MAX_RECTS become one.
 */
export function groupRects(grid: { cols: number; rows: number; changed: boolean[] }, width: number, height: number): Rect[] {
  const { cols, rows, changed } = grid;
  const rects: Rect[] = [];
  /** Rects that end at the previous tile row, by "c0,c1" → index in rects. */
  let open = new Map<string, number>();
  for (let ty = 0; ty < rows; ty++) {
    const next = new Map<string, number>();
    const y = ty * TILE;
    const h = Math.min(height, y + TILE) - y;
    for (let tx = 0; tx < cols; ) {
      if (!changed[ty * cols + tx]) {
        tx++;
        continue;
      }
      const c0 = tx;
      while (tx < cols && changed[ty * cols + tx]) tx++;
      const key = `${c0},${tx}`;
      const above = open.get(key);
      if (above !== undefined) {
        rects[above]!.h += h;
        next.set(key, above);
      } else {
        const x = c0 * TILE;
        rects.push({ x, y, w: Math.min(width, tx * TILE) - x, h });
        next.set(key, rects.length - 1);
      }
    }
    open = next;
  }
  if (rects.length <= MAX_RECTS) return rects;
  return [boundingBox(rects)];
}

function boundingBox(rects: Rect[]): Rect {
  const x0 = Math.min(...rects.map((r) => r.x));
  const y0 = Math.min(...rects.map((r) => r.y));
  const x1 = Math.max(...rects.map((r) => r.x + r.w));
  const y1 = Math.max(...rects.map((r) => r.y + r.h));
  return { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
}

/**
 * A 32-bit hash of each row's bytes in columns [x, x + w) (collisions only cost a worse guess). Read as
 * 32-bit words through a typed-array view when the rows are 4-byte aligned (always, for a frame buffer of
 * its own and a tile-aligned box: the stride and x * 3 are multiples of 4): ~15x faster than
 * `readUInt32LE`, and this runs over the whole changed box of both frames for every message.
 */
export function rowHashes(rgb: Buffer, width: number, box: Rect): Uint32Array {
  const out = new Uint32Array(box.h);
  const stride = width * 3;
  const first = box.y * stride + box.x * 3;
  const aligned = (rgb.byteOffset + first) % 4 === 0 && stride % 4 === 0;
  const words = aligned ? new Uint32Array(rgb.buffer, rgb.byteOffset, Math.floor(rgb.length / 4)) : null;
  for (let i = 0; i < box.h; i++) {
    let h = 0x811c9dc5;
    const start = (box.y + i) * stride + box.x * 3;
    const end = start + box.w * 3;
    let o = start;
    if (words) for (let k = o >> 2, kEnd = (end >> 2); k < kEnd; k++, o += 4) h = Math.imul(h ^ words[k]!, 0x01000193);
    else for (; o + 4 <= end; o += 4) h = Math.imul(h ^ rgb.readUInt32LE(o), 0x01000193);
    for (; o < end; o++) h = Math.imul(h ^ rgb[o]!, 0x01000193);
    out[i] = h >>> 0;
  }
  return out;
}

/**
 * The vertical offset by which the content of `box` moved, if most changed rows say so:
 * `cur` row y equals `prev` row y + dy. Rows whose content occurs once in `prev` vote.
 * `hp`/`hc`: the rows' hashes (rowHashes) when the caller has them.
 */
export function detectScroll(prev: Buffer, cur: Buffer, width: number, box: Rect, hp = rowHashes(prev, width, box), hc = rowHashes(cur, width, box)): CopyRect | null {
  if (box.h < MIN_SCROLL_VOTES * 2) return null;
  const where = new Map<number, number>();
  for (let i = 0; i < hp.length; i++) where.set(hp[i]!, where.has(hp[i]!) ? -1 : i);
  const votes = new Map<number, number>();
  for (let i = 0; i < hc.length; i++) {
    if (hc[i] === hp[i]) continue;
    const j = where.get(hc[i]!);
    if (j === undefined || j < 0) continue;
    votes.set(j - i, (votes.get(j - i) ?? 0) + 1);
  }
  let dy = 0;
  let best = 0;
  for (const [d, n] of votes) if (n > best || (n === best && Math.abs(d) < Math.abs(dy))) [dy, best] = [d, n];
  if (dy === 0 || best < MIN_SCROLL_VOTES) return null;
  // Content moved up by dy (> 0: scrolling down the page) or down by -dy. The copy spans the rows from
  // the first to the last that changed and moved by dy, not the whole box: rows that did not change
  // above or below (a browser's bar, a static header or footer, blank margins) stay as they are, and
  // copying them would only force their repaint.
  let lo = -1;
  let hi = -1;
  for (let i = Math.max(0, -dy); i < Math.min(hc.length, hc.length - dy); i++) {
    if (hc[i] === hp[i] || hc[i] !== hp[i + dy]) continue;
    if (lo < 0) lo = i;
    hi = i;
  }
  return fitCopy(prev, cur, width, box, { sx: box.x, sy: box.y + lo + dy, x: box.x, y: box.y + lo, w: box.w, h: hi - lo + 1 });
}

/**
 * A vertical copy fitted to the content that moved (docs/gateway.md, "Screen encodings"). `detectScroll`
 * finds its rows from whole-row hashes, so a column that does not move with the page — a scrollbar, whose
 * arrows stay put and whose thumb moves a little — both (1) lands in the copy, where the viewer then needs
 * it painted back, and (2) keeps the rows it differs in from matching, so the copy stops short of them and
 * the page's rows there are painted again in full (measured on the bench's scroll: a band of ~20-60 page
 * rows under the top of the viewport, as many bytes as the exposed strip itself). So:
 * 1. columns at the copy's left and right edges (at most COPY_EDGE_COLUMNS each side) are dropped from it
 *    while they differ from the moved content in at least as many rows as from the unmoved one;
 * 2. the rows are extended up and down, within `box`, while they equal their moved source in the kept columns.
 */
export function fitCopy(prev: Buffer, cur: Buffer, width: number, box: Rect, c: CopyRect): CopyRect {
  const dy = c.sy - c.y;
  const stride = width * 3;
  // Per edge column, in how many of the copy's rows it differs from the moved content and from the unmoved
  // one; counted row by row (the rows' bytes are contiguous, a column's are a stride apart).
  const band = Math.min(COPY_EDGE_COLUMNS, c.w);
  const edges = [c.x, c.x + c.w - band];
  const moved = [new Int32Array(band), new Int32Array(band)];
  const still = [new Int32Array(band), new Int32Array(band)];
  for (let y = c.y; y < c.y + c.h; y++) {
    for (let e = 0; e < 2; e++) {
      const m = moved[e]!;
      const s = still[e]!;
      for (let i = 0, at = y * stride + edges[e]! * 3; i < band; i++, at += 3) {
        const src = at + dy * stride;
        if (cur[at] !== prev[src] || cur[at + 1] !== prev[src + 1] || cur[at + 2] !== prev[src + 2]) m[i]!++;
        if (cur[at] !== prev[at] || cur[at + 1] !== prev[at + 1] || cur[at + 2] !== prev[at + 2]) s[i]!++;
      }
    }
  }
  const staticColumn = (x: number) => {
    const e = x >= edges[1]! ? 1 : 0;
    return moved[e]![x - edges[e]!]! >= still[e]![x - edges[e]!]!;
  };
  let x0 = c.x;
  let x1 = c.x + c.w;
  while (x1 - 1 > x0 && x1 > edges[1]! && staticColumn(x1 - 1)) x1--;
  while (x0 < x1 - 1 && x0 < c.x + band && staticColumn(x0)) x0++;
  const moves = (y: number) => cur.compare(prev, (y + dy) * stride + x0 * 3, (y + dy) * stride + x1 * 3, y * stride + x0 * 3, y * stride + x1 * 3) === 0;
  const top = Math.max(box.y, box.y - dy);
  const bottom = Math.min(box.y + box.h, box.y + box.h - dy);
  let y0 = c.y;
  let y1 = c.y + c.h;
  while (y0 > top && moves(y0 - 1)) y0--;
  while (y1 < bottom && moves(y1)) y1++;
  return { sx: x0, sy: y0 + dy, x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
}

/** `rgb` with `c` applied the way a viewer applies it (a new buffer; `rgb` is not touched). */
export function applyCopy(rgb: Buffer, width: number, c: CopyRect, into?: Buffer): Buffer {
  const out = into && into.length === rgb.length ? into : Buffer.allocUnsafe(rgb.length);
  rgb.copy(out);
  const stride = width * 3;
  for (let i = 0; i < c.h; i++) {
    const s = (c.sy + i) * stride + c.sx * 3;
    rgb.copy(out, (c.y + i) * stride + c.x * 3, s, s + c.w * 3);
  }
  return out;
}

/**
 * `r` shrunk to the smallest rectangle holding every pixel that differs between `ref` (what the viewer
 * holds) and `cur`: first its unchanged rows at the top and bottom (a line of text in a terminal is 13
 * rows, not the 64 of its tile row), then its unchanged columns at the left and right (a scrollbar thumb
 * is ~15 pixels wide, not its 64-pixel tile column; a pointer at x = 640 straddles two tile columns).
 * Still one rectangle: trimming never costs another image. `r` is returned as is when nothing in it differs.
 */
export function trimRect(ref: Buffer, cur: Buffer, width: number, r: Rect): Rect {
  const stride = width * 3;
  const same = (y: number) => ref.compare(cur, y * stride + r.x * 3, y * stride + (r.x + r.w) * 3, y * stride + r.x * 3, y * stride + (r.x + r.w) * 3) === 0;
  let y0 = r.y;
  let y1 = r.y + r.h;
  while (y0 < y1 - 1 && same(y0)) y0++;
  while (y1 - 1 > y0 && same(y1 - 1)) y1--;
  // Columns: per changed row, scan only the bytes outside the span already known to change, so once a
  // row changes at the rectangle's edges the rest costs one compare a row.
  let lo = r.x + r.w;
  let hi = r.x;
  for (let y = y0; y < y1; y++) {
    const o = y * stride;
    if (lo === r.x && hi === r.x + r.w) break;
    if (same(y)) continue;
    let b = o + r.x * 3;
    const bLo = o + lo * 3;
    while (b < bLo && ref[b] === cur[b]) b++;
    if (b < bLo) lo = Math.floor((b - o) / 3);
    let e = o + (r.x + r.w) * 3 - 1;
    const eHi = o + hi * 3 - 1;
    while (e > eHi && ref[e] === cur[e]) e--;
    if (e > eHi) hi = Math.floor((e - o) / 3) + 1;
  }
  if (hi <= lo) return { x: r.x, y: y0, w: r.w, h: y1 - y0 };
  return { x: lo, y: y0, w: hi - lo, h: y1 - y0 };
}

/** What changed from `prev` to `cur` (same size), or null when nothing did. */
export function diffFrames(prev: Buffer, cur: Buffer, width: number, height: number): Delta | null {
  return new FrameDiffer().diff(prev, cur, width, height);
}

/**
 * `diffFrames` for a stream of frames, each compared with the one before: it keeps what the next call
 * can reuse, so a message costs about one pass of hashing and no allocation of a whole frame —
 * the row hashes of `cur` (the next call's `prev`, for the same box: a continuous scroll keeps its
 * box) and the buffer the copy is applied in. Measured on this host at 1280x800, a scroll of the whole
 * screen: 85 ms a message before (docs/gateway.md, "Screen encodings").
 */
export class FrameDiffer {
  private scratch: Buffer | null = null;
  private memo: { key: string; hashes: Uint32Array } | null = null;

  diff(prev: Buffer, cur: Buffer, width: number, height: number): Delta | null {
    const memo = this.memo;
    this.memo = null;
    const grid = changedTiles(prev, cur, width, height);
    const direct = groupRects(grid, width, height);
    if (direct.length === 0) return null;
    const tiles = (g: { changed: boolean[] }) => g.changed.filter(Boolean).length;
    const box = boundingBox(direct);
    const key = `${width},${box.x},${box.y},${box.w},${box.h}`;
    const hp = memo?.key === key ? memo.hashes : rowHashes(prev, width, box);
    const hc = rowHashes(cur, width, box);
    this.memo = { key, hashes: hc };
    const copy = detectScroll(prev, cur, width, box, hp, hc);
    if (copy) {
      const ref = (this.scratch = applyCopy(prev, width, copy, this.scratch ?? undefined));
      const after = changedTiles(ref, cur, width, height);
      if (tiles(after) < tiles(grid)) return { copy, rects: groupRects(after, width, height).map((r) => trimRect(ref, cur, width, r)) };
    }
    return { copy: null, rects: direct.map((r) => trimRect(prev, cur, width, r)) };
  }

  /** Forget the hashes kept (the next `prev` is not the last `cur`: a key frame or a skipped frame). */
  reset(): void {
    this.memo = null;
  }
}

/** The pixels of `r` out of a packed-RGB frame, packed. */
export function cropRgb(rgb: Buffer, width: number, r: Rect): Buffer {
  const out = Buffer.allocUnsafe(r.w * r.h * 3);
  const stride = width * 3;
  for (let i = 0; i < r.h; i++) {
    const s = (r.y + i) * stride + r.x * 3;
    rgb.copy(out, i * r.w * 3, s, s + r.w * 3);
  }
  return out;
}

/** Whether `d` repaints the whole frame (then a key frame says the same in one image). */
export function isWhole(d: Delta, width: number, height: number): boolean {
  const r = d.rects[0];
  return !d.copy && d.rects.length === 1 && r!.x === 0 && r!.y === 0 && r!.w === width && r!.h === height;
}

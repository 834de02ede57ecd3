/**
 * Settle-aware input (extension): after an input, watch the framebuffer until it has not changed for
 * `quiet_ms`, bounded by `timeout_ms`, and report what changed against the screen just before the
 * input. Agents stop guessing sleeps: a no-op click answers after quiet_ms, a click that opens a menu
 * after the menu has finished drawing.
 */
import type { ScreenRegion } from '../../../shared/schemas/display.js';
import type { SettleRequest } from '../../../shared/schemas/input.js';
import type { RawFrame } from './screen.js';

/** How often the framebuffer is compared while waiting (a capture is ~1 ms at 1280x800). */
export const SETTLE_POLL_MS = 15;

/**
 * The smallest rectangle holding every pixel that differs between two packed-RGB frames of the same
 * size, or null when they are equal. Rows are compared as whole slices (memcmp) first.
 */
export function diffBox(a: Buffer, b: Buffer, width: number, height: number): ScreenRegion | null {
  const row = width * 3;
  let top = -1;
  let bottom = -1;
  for (let y = 0; y < height; y++) {
    if (a.compare(b, y * row, (y + 1) * row, y * row, (y + 1) * row) !== 0) {
      if (top < 0) top = y;
      bottom = y;
    }
  }
  if (top < 0) return null;
  let left = width;
  let right = -1;
  for (let y = top; y <= bottom; y++) {
    const base = y * row;
    for (let x = 0; x < left; x++) {
      const i = base + x * 3;
      if (a[i] !== b[i] || a[i + 1] !== b[i + 1] || a[i + 2] !== b[i + 2]) {
        left = x;
        break;
      }
    }
    for (let x = width - 1; x > right; x--) {
      const i = base + x * 3;
      if (a[i] !== b[i] || a[i + 1] !== b[i + 1] || a[i + 2] !== b[i + 2]) {
        right = x;
        break;
      }
    }
  }
  return { x: left, y: top, width: right - left + 1, height: bottom - top + 1 };
}

export interface SettleOutcome {
  settled: boolean;
  duration_ms: number;
  changed: boolean;
  changed_box: ScreenRegion | null;
  /** The settled frame (the caller encodes it if asked, then releases it). */
  last: RawFrame;
}

/**
 * `before` is the frame captured just before the input (kept by the caller, released by it), `start`
 * the moment the input completed. Each capture is compared with the previous one; the screen is
 * settled once no change was seen for `quiet_ms`.
 */
export async function waitSettled(
  capture: () => Promise<RawFrame>,
  release: (f: RawFrame) => void,
  before: RawFrame,
  start: number,
  req: Pick<SettleRequest, 'quiet_ms' | 'timeout_ms'>,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<SettleOutcome> {
  let prev = await capture();
  let lastChange = start;
  if (!sameFrame(prev, before)) lastChange = Date.now();
  let settled = false;
  for (;;) {
    const now = Date.now();
    if (now - lastChange >= req.quiet_ms) {
      settled = true;
      break;
    }
    if (now - start >= req.timeout_ms) break;
    await sleep(Math.min(SETTLE_POLL_MS, Math.max(1, req.quiet_ms - (now - lastChange))));
    const cur = await capture();
    if (!sameFrame(cur, prev)) lastChange = Date.now();
    release(prev);
    prev = cur;
  }
  const sameSize = prev.width === before.width && prev.height === before.height;
  const box = sameSize ? diffBox(before.rgb, prev.rgb, prev.width, prev.height) : { x: 0, y: 0, width: prev.width, height: prev.height };
  return { settled, duration_ms: Math.max(0, Date.now() - start), changed: box !== null, changed_box: box, last: prev };
}

function sameFrame(a: RawFrame, b: RawFrame): boolean {
  return a.width === b.width && a.height === b.height && a.rgb.equals(b.rgb);
}

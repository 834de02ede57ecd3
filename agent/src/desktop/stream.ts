/**
 * The screen stream: one long-lived response body of framed messages (shared/agent-protocol.ts).
 * A `status` first, then a `frame` whenever the captured pixels differ from the last capture (at
 * most `fps` per second), a `status` on every up/down or size change, a `keepalive` after
 * KEEPALIVE_MS without anything else. Under backpressure frames are skipped, never queued: the
 * next frame sent after 'drain' is a fresh capture, so a slow viewer sees fewer frames, not old ones.
 *
 * Encoding `tiles`: the first frame after a start or size change is a whole `frame` (the key frame),
 * later changes are `tiles` messages (tiles.ts) against the previous capture. Skipping under backpressure
 * is still safe: the next delta is computed against the last frame *sent*, not the last captured. A
 * key frame is sent again once the deltas since the last one add up to more than KEY_FRAME.deltasPerKey
 * times a key frame at the stream's quality, so whoever replays "key frame + deltas since" to a joining
 * viewer (the gateway) never replays more than about that many frames plus one.
 * During continuous motion deltas — and a key frame falling due then — are encoded at a lower quality,
 * and once the screen is still the area they left is sent again at the stream's quality (refine.ts): as a
 * key frame when that area is the whole screen.
 */
import type { Writable } from 'node:stream';
import { encodeScreenMessage } from '../../../shared/agent-protocol.js';
import type { Desktop } from './desktop.js';
import { encodeRgb, type RawFrame } from './screen.js';
import { LowQualityTiles, Motion, motionQuality } from './refine.js';
import { cropRgb, FrameDiffer, isWhole, type CopyRect, type Rect } from './tiles.js';

export const KEEPALIVE_MS = 5_000;

/**
 * When the `tiles` stream sends a key frame again (decisions as data). A viewer that watches all along
 * never needs one: key frames only bound what a joining or lagging viewer is replayed. Sent once the deltas
 * since the last key frame outweigh `deltasPerKey` key frames at the stream's quality (the last one sent
 * at it, for this size), so in a continuous scroll key frames are at most about 1 / (deltasPerKey + 1) of
 * the bytes (measured, docs/gateway.md "Screen encodings": with 1, 48% of the bytes of the bench's scroll
 * were key frames) and the replay is at most deltasPerKey + 1 frames. A key frame due in motion is sent at
 * the motion quality (refine.ts) and counts as such a unit all the same: measured against its own smaller
 * size, key frames would only come more often.
 */
export const KEY_FRAME = { deltasPerKey: 3 } as const;

export interface StreamOptions {
  format: 'jpeg' | 'webp';
  quality: number;
  fps: number;
  /** Default 'frames'. */
  encoding?: 'frames' | 'tiles';
  /** Quiet time before a keepalive (default KEEPALIVE_MS). */
  keepaliveMs?: number;
}

/** What the stream needs of the desktop. */
export type StreamSource = Pick<Desktop, 'isUp' | 'state' | 'capture' | 'onChange' | 'releaseFrame'>;

/** Runs until `out` closes; returns a function that stops it early. */
export function runScreenStream(desktop: StreamSource, out: Writable, opts: StreamOptions): () => void {
  let stopped = false;
  let blocked = false;
  let busy = false;
  let seq = 0;
  let prev: RawFrame | null = null;
  let lastSent = Date.now();
  /** Tiles: bytes of the last key frame sent at the stream's quality (for this size), and of the deltas since the last key frame. */
  let fullKeyBytes = 0;
  let deltaBytes = 0;
  const differ = new FrameDiffer();
  const motion = new Motion();
  /** Tiles: where the viewer's picture holds pixels sent below full quality (refine.ts). */
  let lowQuality: LowQualityTiles | null = null;
  let status = { up: desktop.isUp, width: desktop.state.width, height: desktop.state.height };

  const write = (buf: Buffer) => {
    if (stopped || out.destroyed || out.writableEnded) return;
    lastSent = Date.now();
    if (!out.write(buf)) {
      blocked = true;
      out.once('drain', () => {
        blocked = false;
      });
    }
  };
  const sendStatus = () => write(encodeScreenMessage({ type: 'status', ...status, bytes: 0 }));
  /** A `tiles` message: `copy`, then `rects` of `frame` encoded at `quality`. */
  const sendDelta = async (frame: RawFrame, capturedAt: number, copy: CopyRect | null, rs: Rect[], quality: number) => {
    const base = { seq: seq++, format: opts.format, width: frame.width, height: frame.height, captured_at: capturedAt };
    // All at once: each encode runs on libuv's pool, so the rectangles share the cores instead of
    // queueing behind one another (the message waits for the slowest, not for the sum).
    const images = await Promise.all(rs.map((r) => encodeRgb(cropRgb(frame.rgb, frame.width, r), r.w, r.h, opts.format, quality)));
    const rects = rs.map((r, i) => ({ ...r, bytes: images[i]!.length }));
    if (stopped) return;
    const payload = Buffer.concat(images);
    deltaBytes += payload.length;
    write(encodeScreenMessage({ type: 'tiles', ...base, copy, rects, bytes: payload.length }, payload));
  };
  /** A whole image (`frames`: every message; `tiles`: a key frame) encoded at `quality`. */
  const sendKey = async (frame: RawFrame, capturedAt: number, quality: number) => {
    const base = { seq: seq++, format: opts.format, width: frame.width, height: frame.height, captured_at: capturedAt };
    const img = await encodeRgb(frame.rgb, frame.width, frame.height, opts.format, quality);
    if (stopped) return;
    if (quality === opts.quality) fullKeyBytes = img.length;
    deltaBytes = 0;
    write(encodeScreenMessage({ type: 'frame', ...base, bytes: img.length }, img));
  };

  /** A tick (or a change) came while the previous tick was still running. */
  let missed = false;
  const tick = async () => {
    if (stopped || blocked) return;
    if (busy) {
      missed = true;
      return;
    }
    busy = true;
    try {
      const s = desktop.state;
      if (s.up !== status.up || s.width !== status.width || s.height !== status.height) {
        status = { up: s.up, width: s.width, height: s.height };
        prev = null;
        fullKeyBytes = 0;
        sendStatus();
      }
      if (s.up) {
        const capturedAt = Date.now();
        const frame = await desktop.capture().catch(() => null);
        if (!frame) return;
        if (stopped) return desktop.releaseFrame(frame);
        if (!prev || !prev.rgb.equals(frame.rgb)) {
          const diff = opts.encoding === 'tiles' && prev && deltaBytes <= fullKeyBytes * KEY_FRAME.deltasPerKey ? differ.diff(prev.rgb, frame.rgb, frame.width, frame.height) : (differ.reset(), null);
          // A delta that repaints everything is a key frame.
          const delta = diff && !isWhole(diff, frame.width, frame.height) ? diff : null;
          if (prev) desktop.releaseFrame(prev);
          prev = frame;
          const inMotion = motion.changed(capturedAt);
          if (delta && lowQuality) {
            const quality = inMotion ? motionQuality(opts.quality) : opts.quality;
            if (delta.copy) lowQuality.copy(delta.copy);
            for (const r of delta.rects) lowQuality.paint(r, quality < opts.quality);
            return await sendDelta(frame, capturedAt, delta.copy, delta.rects, quality);
          }
          // A key frame (or, for `frames`, any frame). In motion, and with a key frame at full quality to
          // measure the deltas against, at the motion quality: marked whole, to be refined once still.
          lowQuality = opts.encoding === 'tiles' ? new LowQualityTiles(frame.width, frame.height) : null;
          const quality = lowQuality && inMotion && fullKeyBytes ? motionQuality(opts.quality) : opts.quality;
          lowQuality?.paint({ x: 0, y: 0, w: frame.width, h: frame.height }, quality < opts.quality);
          return await sendKey(frame, capturedAt, quality);
        }
        desktop.releaseFrame(frame);
        // Still for a moment after motion: the tiles sent below full quality, again at full quality.
        if (motion.still(Date.now()) && prev && lowQuality && !lowQuality.empty) {
          const rects = lowQuality.rects();
          lowQuality.clear();
          if (isWhole({ copy: null, rects }, prev.width, prev.height)) return await sendKey(prev, capturedAt, opts.quality);
          return await sendDelta(prev, capturedAt, null, rects, opts.quality);
        }
      }
      if (Date.now() - lastSent >= (opts.keepaliveMs ?? KEEPALIVE_MS)) write(encodeScreenMessage({ type: 'keepalive', bytes: 0 }));
    } finally {
      busy = false;
      // Run what came meanwhile now, not at the next interval: a tick taking a little more than 1000 / fps ms
      // (a loaded host) would otherwise wait for the one after, halving the rate (33 ms → 66 ms a message at
      // 30 fps). Still at most one tick per tick of the interval or change, so never above `fps` for long.
      if (missed) {
        missed = false;
        void tick();
      }
    }
  };

  const stop = () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    unsubscribe();
  };
  // Status changes are reported at once rather than at the next tick.
  const unsubscribe = desktop.onChange(() => void tick());
  const timer = setInterval(() => void tick(), Math.max(1, Math.floor(1000 / opts.fps)));
  out.once('close', stop);
  // Kept for the stream's life: an 'error' without a listener would take the agent down.
  out.on('error', stop);
  sendStatus();
  void tick();
  return stop;
}

/**
 * The guest agent's protocol: HTTP/2 cleartext over a private channel (unix socket or virtio-serial).
 *
 * Routes mirror the public machine routes with the `/v1/machines/{id}` prefix removed, so the control
 * plane's proxy is a pass-through. Bodies and errors use the same schemas and envelope as `/v1`.
 * Every request carries `Authorization: Bearer <key>`: the machine's agent key, which the control plane hands to
 * each agent process once over the channel (`auth.enroll`; agent/src/enrollment.ts) and never stores in the guest.
 */
import { z } from 'zod';
import { Display, ResizeRequest, ScreenRegion, ScreenshotFormat, ScreenshotResult } from './schemas/display.js';
import {
  BrowserOpen,
  BrowserOpenResult,
  ClipboardContent,
  ClipboardSelection,
  ClipboardWrite,
  InputResult,
  KeyboardHotkey,
  KeyboardKey,
  KeyboardType,
  MouseClick,
  MouseDrag,
  MouseMove,
  MouseScroll,
} from './schemas/input.js';
import { ListQuery, ListResult, MAX_WRITE_BODY_BYTES, ReadQuery, ReadResult, WriteBody, WriteQuery, WriteResult } from './schemas/files.js';
import { ExecRequest, ExecResult } from './schemas/exec.js';
import { PtyOpen, PtyResize, Terminal, TerminalList } from './schemas/pty.js';
import { SecretsDelivered, SecretsReplace } from './schemas/secrets.js';
import { queryInt } from './schemas/common.js';

export const AGENT_PROTOCOL_VERSION = 1;

/**
 * `maxSessionMemory` (MB) of both ends of the agent channel. Node's default (10 MB) is smaller than
 * one maximal file write (MAX_WRITE_BODY_BYTES, ~44 MB of JSON): while such a body was in flight the
 * agent refused every other new stream of the machine (RST_STREAM ENHANCE_YOUR_CALM), so a concurrent
 * request failed as 503. Room for three maximal writes at once plus the 32 MB connection window; the
 * real bound on buffered data stays HTTP/2 flow control and the body limits, per stream.
 */
export const AGENT_SESSION_MEMORY_MB = Math.ceil((3 * MAX_WRITE_BODY_BYTES) / (1024 * 1024)) + 32;

export const ScreenshotQuery = z.strictObject({
  format: ScreenshotFormat.default('png'),
  quality: queryInt(1, 100).optional(),
  // Extension (not in the spec): server-side scaling and cropping; the answer then carries `view`.
  /** Output width; with only one of width/height the other keeps the region's aspect ratio. */
  width: queryInt(1, 16384).optional(),
  height: queryInt(1, 16384).optional(),
  /** Scale down (never up) so the longer side is at most this; not combinable with width/height. */
  max_side: queryInt(16, 16384).optional(),
  /** `x,y,width,height` in display pixels: only this part of the screen (zoom). */
  region: z
    .string()
    .regex(/^\d{1,5},\d{1,5},\d{1,5},\d{1,5}$/, 'must be x,y,width,height in display pixels')
    .transform((v) => {
      const [x, y, width, height] = v.split(',').map(Number) as [number, number, number, number];
      return { x, y, width, height };
    })
    .pipe(ScreenRegion)
    .optional(),
});
export type ScreenshotQuery = z.infer<typeof ScreenshotQuery>;

export const ClipboardQuery = z.strictObject({ selection: ClipboardSelection.default('clipboard') });

export const MAX_SCREEN_FPS = 30;
export const ScreenStreamQuery = z.strictObject({
  format: z.enum(['jpeg', 'webp']).default('jpeg'),
  quality: queryInt(1, 100).default(60),
  /** Frame-rate cap; frames are only sent when the screen changed. */
  fps: queryInt(1, MAX_SCREEN_FPS).default(10),
  /**
   * `frames` (default): a whole image per change. `tiles`: a whole image (key frame) first, after a size
   * change and when the deltas since the last one outweigh it (three times, agent KEY_FRAME); in between only what changed (`tiles`
   * messages: a scroll copy and rectangles), docs/gateway.md "Screen encodings".
   */
  encoding: z.enum(['frames', 'tiles']).default('frames'),
});
export type ScreenStreamQuery = z.infer<typeof ScreenStreamQuery>;

export const Health = z.object({
  ok: z.boolean(),
  protocol: z.number().int(),
  desktop: Display,
});
export type Health = z.infer<typeof Health>;

type RouteDef = {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: z.ZodType;
  body?: z.ZodType;
  response?: z.ZodType;
  /** A long-lived byte stream rather than a JSON answer. */
  stream?: 'duplex' | 'frames';
};

/**
 * The control plane's key for one agent process: 256 random bits, base64url. Sent with the enrollment's proof
 * as bearer (the current key, or for a fresh agent the one-time secret the substrate dropped for it).
 */
export const EnrollRequest = z.strictObject({ key: z.string().regex(/^[A-Za-z0-9_-]{32,128}$/, 'key is 32-128 base64url characters') });
export type EnrollRequest = z.infer<typeof EnrollRequest>;

/** Every agent route. Operation names double as log and metrics labels. */
export const AGENT_ROUTES = {
  /** 204 once the key is installed; 401 when the proof is not accepted. The only route open without the key. */
  'auth.enroll': { method: 'POST', path: '/auth/enroll', body: EnrollRequest },
  health: { method: 'GET', path: '/health', response: Health },
  'display.get': { method: 'GET', path: '/display', response: Display },
  'display.resize': { method: 'POST', path: '/display/resize', body: ResizeRequest, response: Display },
  screenshot: { method: 'GET', path: '/screenshot', query: ScreenshotQuery, response: ScreenshotResult },
  'screen.stream': { method: 'GET', path: '/screen/stream', query: ScreenStreamQuery, stream: 'frames' },
  /**
   * Where the pointer is, without moving it. Agent-only: the spec has no read-only pointer query, so no /v1
   * route serves it; the tool endpoints' cursor_position reads it inside the control plane.
   */
  'mouse.position': { method: 'GET', path: '/mouse/position', response: InputResult },
  'mouse.move': { method: 'POST', path: '/mouse/move', body: MouseMove, response: InputResult },
  'mouse.click': { method: 'POST', path: '/mouse/click', body: MouseClick, response: InputResult },
  'mouse.drag': { method: 'POST', path: '/mouse/drag', body: MouseDrag, response: InputResult },
  'mouse.scroll': { method: 'POST', path: '/mouse/scroll', body: MouseScroll, response: InputResult },
  'keyboard.key': { method: 'POST', path: '/keyboard/key', body: KeyboardKey, response: InputResult },
  'keyboard.type': { method: 'POST', path: '/keyboard/type', body: KeyboardType, response: InputResult },
  'keyboard.hotkey': { method: 'POST', path: '/keyboard/hotkey', body: KeyboardHotkey, response: InputResult },
  'clipboard.get': { method: 'GET', path: '/clipboard', query: ClipboardQuery, response: ClipboardContent },
  'clipboard.set': { method: 'PUT', path: '/clipboard', body: ClipboardWrite, response: ClipboardContent },
  'browser.open': { method: 'POST', path: '/browser/open', body: BrowserOpen, response: BrowserOpenResult },
  'files.list': { method: 'GET', path: '/files', query: ListQuery, response: ListResult },
  'files.read': { method: 'GET', path: '/files/content', query: ReadQuery, response: ReadResult },
  'files.write': { method: 'PUT', path: '/files/content', query: WriteQuery, body: WriteBody, response: WriteResult },
  exec: { method: 'POST', path: '/exec', body: ExecRequest, response: ExecResult },
  'terminals.open': { method: 'POST', path: '/terminals', body: PtyOpen, response: Terminal },
  'terminals.list': { method: 'GET', path: '/terminals', response: TerminalList },
  'terminals.kill': { method: 'DELETE', path: '/terminals/:term_id' },
  'terminals.resize': { method: 'POST', path: '/terminals/:term_id/resize', body: PtyResize, response: Terminal },
  /** Full-duplex HTTP/2 stream: request body = bytes to the pty, response body = bytes from it. */
  'terminals.attach': { method: 'POST', path: '/terminals/:term_id/attach', stream: 'duplex' },
  /**
   * Full-duplex HTTP/2 stream to a TCP port on the guest's loopback (published ports): request body =
   * bytes to the connection, response body = bytes from it. 200 once connected; 503 when nothing listens.
   */
  'tcp.connect': { method: 'POST', path: '/tcp/:port/connect', stream: 'duplex' },
  'secrets.replace': { method: 'PUT', path: '/secrets', body: SecretsReplace, response: SecretsDelivered },
  'secrets.delete': { method: 'DELETE', path: '/secrets/:name', response: SecretsDelivered },
} as const satisfies Record<string, RouteDef>;

export type AgentOperation = keyof typeof AGENT_ROUTES;

/** Response header naming the pty's exit status on a finished attach stream (sent as a trailer). */
export const PTY_EXIT_TRAILER = 'x-pty-exit-code';

// ---------------------------------------------------------------------------------------------
// Screen stream framing: [u32 BE header length][header JSON][payload of header.bytes bytes]
// ---------------------------------------------------------------------------------------------

/**
 * Bounds of the screen stream. The bytes come from the guest, which a tenant controls completely (it
 * can replace the agent), so the control plane parses every header against `ScreenMessage` and refuses
 * anything outside these bounds instead of trusting a length it was sent.
 */
export const MAX_SCREEN_HEADER_BYTES = 4096;
/** A 16384×16384 JPEG at quality 100 stays below this; a frame claiming more is a protocol violation. */
export const MAX_SCREEN_FRAME_BYTES = 32 * 1024 * 1024;

const ScreenDim = z.number().int().min(0).max(16384);
/** Rectangles in one `tiles` message (the agent sends at most 48; the header bound caps it anyway). */
export const MAX_SCREEN_RECTS = 64;
const Offset = z.number().int().min(0).max(16384);
const Extent = z.number().int().min(1).max(16384);
export const ScreenTileRect = z.strictObject({ x: Offset, y: Offset, w: Extent, h: Extent, bytes: z.number().int().min(1).max(MAX_SCREEN_FRAME_BYTES) });
export const ScreenCopyRect = z.strictObject({ sx: Offset, sy: Offset, x: Offset, y: Offset, w: Extent, h: Extent });
const inside = (r: { x: number; y: number; w: number; h: number }, width: number, height: number) => r.x + r.w <= width && r.y + r.h <= height;
/**
 * What changed since the previous message: copy `copy` (the viewer's own pixels, a scroll), then paint
 * each rect's image (its `bytes` of the payload, in order) at its place. Every rectangle lies within the
 * frame and the sizes add up to `bytes`, or the message is refused.
 */
const TilesMessage = z
  .object({
    type: z.literal('tiles'),
    seq: z.number().int().min(0),
    format: z.enum(['jpeg', 'webp']),
    width: ScreenDim,
    height: ScreenDim,
    captured_at: z.number().finite(),
    copy: ScreenCopyRect.nullable(),
    rects: z.array(ScreenTileRect).max(MAX_SCREEN_RECTS),
    bytes: z.number().int().min(0).max(MAX_SCREEN_FRAME_BYTES),
  })
  .superRefine((m, ctx) => {
    if (!m.copy && m.rects.length === 0) ctx.addIssue({ code: 'custom', path: ['rects'], message: 'empty delta' });
    if (m.copy && !(inside(m.copy, m.width, m.height) && inside({ ...m.copy, x: m.copy.sx, y: m.copy.sy }, m.width, m.height))) {
      ctx.addIssue({ code: 'custom', path: ['copy'], message: 'outside the frame' });
    }
    m.rects.forEach((r, i) => {
      if (!inside(r, m.width, m.height)) ctx.addIssue({ code: 'custom', path: ['rects', i], message: 'outside the frame' });
    });
    if (m.rects.reduce((n, r) => n + r.bytes, 0) !== m.bytes) ctx.addIssue({ code: 'custom', path: ['bytes'], message: 'not the sum of the rects' });
  });
export type ScreenTilesMessage = z.infer<typeof TilesMessage>;
export const ScreenMessage = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('frame'),
    seq: z.number().int().min(0),
    format: z.enum(['jpeg', 'webp']),
    width: ScreenDim,
    height: ScreenDim,
    captured_at: z.number().finite(),
    bytes: z.number().int().min(1).max(MAX_SCREEN_FRAME_BYTES),
  }),
  z.object({ type: z.literal('status'), up: z.boolean(), width: ScreenDim, height: ScreenDim, bytes: z.literal(0) }),
  z.object({ type: z.literal('keepalive'), bytes: z.literal(0) }),
  TilesMessage,
]);
export type ScreenMessage = z.infer<typeof ScreenMessage>;

export function encodeScreenMessage(header: ScreenMessage, payload?: Buffer): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32BE(json.length, 0);
  return payload ? Buffer.concat([len, json, payload]) : Buffer.concat([len, json]);
}

/** The screen stream broke its framing: the reader must drop the stream (never wait for more bytes). */
export class ScreenStreamError extends Error {
  constructor(message: string) {
    super(`screen stream: ${message}`);
    this.name = 'ScreenStreamError';
  }
}

/**
 * Incremental decoder for the screen stream; feed it chunks, get whole messages out.
 *
 * Invariant (the bytes are hostile): every header is parsed against `ScreenMessage` before its length
 * is used, so each message consumes at least its 4-byte prefix and the buffer never holds more than one
 * bounded message plus one chunk. A violation throws `ScreenStreamError` and poisons the decoder: a
 * negative, fractional or non-numeric length can neither rewind the buffer nor make the loop spin.
 */
export class ScreenStreamDecoder {
  private chunks: Buffer[] = [];
  private length = 0;
  /** The parsed header whose payload has not fully arrived yet. */
  private pending: ScreenMessage | null = null;
  private broken: ScreenStreamError | null = null;

  push(chunk: Buffer): Array<{ header: ScreenMessage; payload: Buffer }> {
    if (this.broken) throw this.broken;
    if (chunk.length) {
      this.chunks.push(chunk);
      this.length += chunk.length;
    }
    const out: Array<{ header: ScreenMessage; payload: Buffer }> = [];
    try {
      for (;;) {
        if (!this.pending) {
          if (this.length < 4) break;
          const hlen = this.peek(4).readUInt32BE(0);
          if (hlen < 2 || hlen > MAX_SCREEN_HEADER_BYTES) throw new ScreenStreamError(`header length ${hlen} out of bounds`);
          if (this.length < 4 + hlen) break;
          this.pending = parseHeader(this.take(4 + hlen).subarray(4));
        }
        if (this.length < this.pending.bytes) break;
        out.push({ header: this.pending, payload: this.pending.bytes ? this.take(this.pending.bytes) : Buffer.alloc(0) });
        this.pending = null;
      }
    } catch (e) {
      this.broken = e instanceof ScreenStreamError ? e : new ScreenStreamError('malformed');
      this.chunks = [];
      this.length = 0;
      throw this.broken;
    }
    return out;
  }

  private peek(n: number): Buffer {
    return this.chunks[0]!.length >= n ? this.chunks[0]! : Buffer.concat(this.chunks, this.length);
  }

  /** Removes and returns the first `n` buffered bytes (a copy, so it does not pin a larger chunk). */
  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length);
    const head = Buffer.from(all.subarray(0, n));
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.length = rest.length;
    return head;
  }
}

function parseHeader(raw: Buffer): ScreenMessage {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ScreenStreamError('header is not JSON');
  }
  const r = ScreenMessage.safeParse(json);
  if (!r.success) throw new ScreenStreamError(`bad header (${r.error.issues.map((i) => i.path.join('.') || 'header').join(', ')})`);
  return r.data;
}

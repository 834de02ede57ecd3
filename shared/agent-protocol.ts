/**
 * The guest agent's protocol: HTTP/2 cleartext over a private channel (unix socket or virtio-serial).
 *
 * Routes mirror the public machine routes with the `/v1/machines/{id}` prefix removed, so the control
 * plane's proxy is a pass-through. Bodies and errors use the same schemas and envelope as `/v1`.
 * Every request carries `Authorization: Bearer <machine token>`.
 */
import { z } from 'zod';
import { Display, ResizeRequest, ScreenshotFormat, ScreenshotResult } from './schemas/display.js';
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
import { ListQuery, ListResult, ReadQuery, ReadResult, WriteBody, WriteQuery, WriteResult } from './schemas/files.js';
import { ExecRequest, ExecResult } from './schemas/exec.js';
import { PtyOpen, PtyResize, Terminal, TerminalList } from './schemas/pty.js';
import { SecretsDelivered, SecretsReplace } from './schemas/secrets.js';
import { queryInt } from './schemas/common.js';

export const AGENT_PROTOCOL_VERSION = 1;

export const ScreenshotQuery = z.strictObject({
  format: ScreenshotFormat.default('png'),
  quality: queryInt(1, 100).optional(),
});
export type ScreenshotQuery = z.infer<typeof ScreenshotQuery>;

export const ClipboardQuery = z.strictObject({ selection: ClipboardSelection.default('clipboard') });

export const MAX_SCREEN_FPS = 30;
export const ScreenStreamQuery = z.strictObject({
  format: z.enum(['jpeg', 'webp']).default('jpeg'),
  quality: queryInt(1, 100).default(60),
  /** Frame-rate cap; frames are only sent when the screen changed. */
  fps: queryInt(1, MAX_SCREEN_FPS).default(10),
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

/** Every agent route. Operation names double as log and metrics labels. */
export const AGENT_ROUTES = {
  health: { method: 'GET', path: '/health', response: Health },
  'display.get': { method: 'GET', path: '/display', response: Display },
  'display.resize': { method: 'POST', path: '/display/resize', body: ResizeRequest, response: Display },
  screenshot: { method: 'GET', path: '/screenshot', query: ScreenshotQuery, response: ScreenshotResult },
  'screen.stream': { method: 'GET', path: '/screen/stream', query: ScreenStreamQuery, stream: 'frames' },
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
  'secrets.replace': { method: 'PUT', path: '/secrets', body: SecretsReplace, response: SecretsDelivered },
  'secrets.delete': { method: 'DELETE', path: '/secrets/:name', response: SecretsDelivered },
} as const satisfies Record<string, RouteDef>;

export type AgentOperation = keyof typeof AGENT_ROUTES;

/** Response header naming the pty's exit status on a finished attach stream (sent as a trailer). */
export const PTY_EXIT_TRAILER = 'x-pty-exit-code';

// ---------------------------------------------------------------------------------------------
// Screen stream framing: [u32 BE header length][header JSON][payload of header.bytes bytes]
// ---------------------------------------------------------------------------------------------

export type ScreenMessage =
  | { type: 'frame'; seq: number; format: 'jpeg' | 'webp'; width: number; height: number; captured_at: number; bytes: number }
  | { type: 'status'; up: boolean; width: number; height: number; bytes: 0 }
  | { type: 'keepalive'; bytes: 0 };

export function encodeScreenMessage(header: ScreenMessage, payload?: Buffer): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32BE(json.length, 0);
  return payload ? Buffer.concat([len, json, payload]) : Buffer.concat([len, json]);
}

/** Incremental decoder for the screen stream; feed it chunks, get whole messages out. */
export class ScreenStreamDecoder {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Array<{ header: ScreenMessage; payload: Buffer }> {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Array<{ header: ScreenMessage; payload: Buffer }> = [];
    for (;;) {
      if (this.buf.length < 4) break;
      const hlen = this.buf.readUInt32BE(0);
      if (hlen > 65536) throw new Error('screen stream: header too large');
      if (this.buf.length < 4 + hlen) break;
      const header = JSON.parse(this.buf.subarray(4, 4 + hlen).toString('utf8')) as ScreenMessage;
      const total = 4 + hlen + header.bytes;
      if (this.buf.length < total) break;
      out.push({ header, payload: Buffer.from(this.buf.subarray(4 + hlen, total)) });
      this.buf = this.buf.subarray(total);
    }
    return out;
  }
}

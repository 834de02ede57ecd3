/**
 * The gateway's WebSocket channels (docs/gateway.md): addresses, query parameters, close codes and the
 * JSON text messages of each channel. Binary WebSocket messages carry raw bytes (screen images, pty I/O)
 * and have no schema.
 */
import { z } from 'zod';
import { ScreenStreamQuery } from '../agent-protocol.js';
import { KeyboardHotkey, KeyboardKey, KeyboardTypeFields, MouseClick, MouseDrag, MouseMove, MouseScroll, oneOfTextOrSecret } from './input.js';
import { PtyResize } from './pty.js';

/** Channel paths (relative to the server root), `{id}` a machine id, `{term_id}` a terminal id. */
export const GATEWAY_PATHS = {
  screen: '/v1/machines/{id}/screen',
  terminal: '/v1/machines/{id}/terminals/{term_id}/attach',
  events: '/v1/machines/{id}/events/live',
  input: '/v1/machines/{id}/input',
} as const;
export type GatewayChannel = keyof typeof GATEWAY_PATHS;

/**
 * Close codes after the handshake. Refusals that can be decided before it (credentials, permission,
 * unknown machine, bad query) are plain HTTP error responses in the API's envelope instead.
 */
export const CLOSE_CODES = {
  normal: 1000,
  going_away: 1001,
  /** Credentials no longer valid (key revoked, session signed out): checked again every 15 s. */
  unauthenticated: 4401,
  permission_denied: 4403,
  not_found: 4404,
  /** Events channel: the client read too slowly to be sent every event; resume from the last cursor. */
  slow_consumer: 4408,
  /** Terminal already holds a client. */
  conflict: 4409,
  /** The machine's agent cannot be reached (stopped, restarting): retry. */
  compute_unavailable: 4503,
  internal_error: 4500,
} as const;
export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];

// ---------------------------------------------------------------------------------------------
// Query parameters
// ---------------------------------------------------------------------------------------------

/**
 * Any channel may name the caller's session (`session_id`): while a channel is open with it the session is
 * attached, so it stays `active` (docs/api-machines.md, "Sessions"). Input requires it.
 */
const AttachedSession = z.string().min(1).max(64).optional();

/** Screen: the agent stream's parameters; viewers asking for the same ones share one agent stream. */
export const ScreenChannelQuery = ScreenStreamQuery.extend({ session_id: AttachedSession });
export type ScreenChannelQuery = z.infer<typeof ScreenChannelQuery>;

export const EventsChannelQuery = z.strictObject({
  /** Resume after this event (a `cursor` from an earlier `event` message). Omitted: new events only. */
  cursor: z.string().min(1).max(64).optional(),
  session_id: AttachedSession,
});
export type EventsChannelQuery = z.infer<typeof EventsChannelQuery>;

export const InputChannelQuery = z.strictObject({
  /** The caller's own agent or human session on this machine; it must hold the lease for input to apply. */
  session_id: z.string().min(1).max(64),
});
export type InputChannelQuery = z.infer<typeof InputChannelQuery>;

export const TerminalChannelQuery = z.strictObject({ session_id: AttachedSession });

// ---------------------------------------------------------------------------------------------
// Screen channel (server → client; binary messages are encoded images of the announced format)
// ---------------------------------------------------------------------------------------------

export type ScreenStatusMessage = {
  type: 'status';
  /** The desktop answers and frames flow. */
  up: boolean;
  width: number;
  height: number;
  format: 'jpeg' | 'webp';
  /** What binary messages are (the channel's `encoding` parameter): see ScreenServerMessage. */
  encoding: 'frames' | 'tiles';
  /** `compute_unavailable` while there are no frames (desktop down, machine stopped or unreachable). */
  code: 'compute_unavailable' | null;
  message: string | null;
};
/**
 * Text: the status, sent first, then on every up/down or size change. Binary, by the negotiated
 * `encoding` (`?encoding=`, default `frames`, which is all that viewers from before it know):
 * - `frames`: each message is one bare image of the whole screen.
 * - `tiles`: each message is `[u32 BE header length][header JSON][payload]` (the agent's framing,
 *   shared/agent-protocol.ts, re-framed by the gateway from the parsed header): a `frame` header = the
 *   payload is a whole image (a key frame: always the first message, and after a size change); a `tiles`
 *   header = copy `copy` (sx, sy, w, h → x, y) within the viewer's own picture, then paint each of
 *   `rects` (x, y, w, h, bytes: consecutive slices of the payload, each an image) at its place.
 *   `decodeScreenTilesMessage` (shared/screen-tiles.ts) parses one.
 */
export type ScreenServerMessage = ScreenStatusMessage;

// ---------------------------------------------------------------------------------------------
// Terminal channel (binary both ways = pty bytes, unmodified)
// ---------------------------------------------------------------------------------------------

export const TerminalResizeMessage = PtyResize.extend({ type: z.literal('resize') });
export const TerminalClientMessage = TerminalResizeMessage;
export type TerminalClientMessage = z.infer<typeof TerminalClientMessage>;

export type TerminalServerMessage =
  | { type: 'exit'; exit_code: number | null }
  | { type: 'resized'; cols: number; rows: number }
  | { type: 'error'; code: string; message: string };

// ---------------------------------------------------------------------------------------------
// Events channel (server → client only)
// ---------------------------------------------------------------------------------------------

export type EventsServerMessage = {
  type: 'event';
  /** Pass as `?cursor=` to resume right after this event. */
  cursor: string;
  event: { id: string; type: string; machine_id: string; created_at: string; data: Record<string, unknown> };
};

// ---------------------------------------------------------------------------------------------
// Input channel
// ---------------------------------------------------------------------------------------------

/** The fence the message was sent under (from the input-lease acquire response). */
const Fence = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** Optional client correlation id, echoed in the `ack` / `error` answer. */
const ClientId = z.string().max(64).optional();
const envelope = { fence: Fence, id: ClientId };

export const INPUT_MESSAGE_TYPES = [
  'mouse.move',
  'mouse.click',
  'mouse.drag',
  'mouse.scroll',
  'keyboard.key',
  'keyboard.type',
  'keyboard.hotkey',
] as const;
export type InputMessageType = (typeof INPUT_MESSAGE_TYPES)[number];

/** One pointer or keyboard action: the matching /v1 route's body plus `type`, `fence` and optional `id`. */
export const InputMessage = z.discriminatedUnion('type', [
  MouseMove.extend({ type: z.literal('mouse.move'), ...envelope }),
  MouseClick.extend({ type: z.literal('mouse.click'), ...envelope }),
  MouseDrag.extend({ type: z.literal('mouse.drag'), ...envelope }),
  MouseScroll.extend({ type: z.literal('mouse.scroll'), ...envelope }),
  KeyboardKey.extend({ type: z.literal('keyboard.key'), ...envelope }),
  // As the /v1 route: exactly one of `text` or `secret` (typed by reference; the value never crosses the socket).
  KeyboardTypeFields.extend({ type: z.literal('keyboard.type'), ...envelope }).superRefine(oneOfTextOrSecret),
  KeyboardHotkey.extend({ type: z.literal('keyboard.hotkey'), ...envelope }),
]);
export type InputMessage = z.infer<typeof InputMessage>;

/** Per-socket input rate limit: a token bucket refilled at RATE per second holding at most BURST. */
export const INPUT_RATE_PER_SECOND = 200;
export const INPUT_RATE_BURST = 200;

export type InputServerMessage =
  /** The action was applied by the machine (the /v1 route's answer). */
  | { type: 'ack'; id: string | null; op: InputMessageType; result: unknown }
  /** Sent exactly once; afterwards every input message on this socket is ignored (read-only). */
  | { type: 'lease_lost'; fence: number | null; message: string }
  /** The message was not applied (invalid, rate limited, refused by the machine). */
  | { type: 'error'; id: string | null; code: string; message: string; details?: Array<{ field: string; message: string }> };

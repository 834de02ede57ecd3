import { z } from 'zod';
import { Display, ScreenRegion, ScreenshotFormat, ScreenshotView } from './display.js';
import { SecretName } from './secrets.js';

export const MAX_COORDINATE = 16384;

/** A pointer position in the pixel space of the current display. Never scaled, never clamped. */
export const Point = z.strictObject({
  x: z.number().int().min(0).max(MAX_COORDINATE),
  y: z.number().int().min(0).max(MAX_COORDINATE),
});
export type Point = z.infer<typeof Point>;

export const MouseButton = z.enum(['left', 'middle', 'right']);
export type MouseButton = z.infer<typeof MouseButton>;

/**
 * Extension (not in the spec): modifier keys held for exactly the duration of a click, drag or
 * scroll, pressed before its first button event and released after its last, with no other input in
 * between (shift-click, ctrl-click, alt-drag, shift-scroll).
 */
export const Modifier = z.enum(['shift', 'ctrl', 'alt', 'super']);
export type Modifier = z.infer<typeof Modifier>;
const Modifiers = z
  .array(Modifier)
  .max(4)
  .refine((m) => new Set(m).size === m.length, 'each modifier at most once');

/**
 * Extension (not in the spec): after the input, wait until the screen has not changed for `quiet_ms`
 * (at most `timeout_ms`), and say what changed; optionally with the screenshot of the settled screen.
 */
export const SettleRequest = z.strictObject({
  quiet_ms: z.number().int().min(20).max(10_000).default(300),
  // Capped so that input plus settling stays inside the control plane's 30 s agent request deadline.
  timeout_ms: z.number().int().min(50).max(20_000).default(5_000),
  screenshot: z
    .strictObject({
      format: ScreenshotFormat.default('png'),
      quality: z.number().int().min(1).max(100).optional(),
      width: z.number().int().min(1).max(16384).optional(),
      height: z.number().int().min(1).max(16384).optional(),
      max_side: z.number().int().min(16).max(16384).optional(),
    })
    .optional(),
});
export type SettleRequest = z.infer<typeof SettleRequest>;

export const SettleResult = z.object({
  /** false: the screen was still changing when timeout_ms ran out. */
  settled: z.boolean(),
  /** From the end of the input to the moment the screen was judged settled (or the timeout). */
  duration_ms: z.number().int().min(0),
  /** Whether the settled screen differs from the screen just before the input. */
  changed: z.boolean(),
  /** The smallest rectangle holding every changed pixel; null when nothing changed. */
  changed_box: ScreenRegion.nullable(),
  screenshot: z.object({ image: z.string(), format: ScreenshotFormat, view: ScreenshotView.optional() }).optional(),
});
export type SettleResult = z.infer<typeof SettleResult>;

export const MouseMove = Point.extend({ settle: SettleRequest.optional() });
export type MouseMove = z.infer<typeof MouseMove>;

export const MouseClick = z.strictObject({
  /** Where to click; the current pointer position when omitted. */
  at: Point.optional(),
  button: MouseButton.default('left'),
  /** 2 is a double click. */
  count: z.number().int().min(1).max(3).default(1),
  /** Press and hold (without `up`): the button stays down until a later call with `up`. */
  down: z.boolean().optional(),
  /** Release a held button (without `down`). */
  up: z.boolean().optional(),
  modifiers: Modifiers.optional(),
  settle: SettleRequest.optional(),
});
export type MouseClick = z.infer<typeof MouseClick>;

export const MouseDrag = z.strictObject({
  /** Start of the drag; the current pointer position when omitted. */
  from: Point.optional(),
  to: Point,
  /** Intermediate pointer positions on the path (the path is a straight line). */
  steps: z.number().int().min(1).max(200).default(10),
  button: MouseButton.default('left'),
  modifiers: Modifiers.optional(),
  settle: SettleRequest.optional(),
});
export type MouseDrag = z.infer<typeof MouseDrag>;

export const ScrollDirection = z.enum(['up', 'down', 'left', 'right']);
export const MouseScroll = z.strictObject({
  direction: ScrollDirection,
  /** Wheel clicks. */
  amount: z.number().int().min(1).max(100).default(3),
  at: Point.optional(),
  modifiers: Modifiers.optional(),
  settle: SettleRequest.optional(),
});
export type MouseScroll = z.infer<typeof MouseScroll>;

/** One named key (an X keysym name such as Return, Tab, F6, a, BackSpace). */
export const KeyName = z.string().min(1).max(32).regex(/^[A-Za-z0-9_]+$/, 'key names match ^[A-Za-z0-9_]+$');

export const KeyboardKey = z.strictObject({
  key: KeyName,
  repeat: z.number().int().min(1).max(100).default(1),
  /** Press and hold without releasing. */
  down: z.boolean().optional(),
  /** Release a held key. */
  up: z.boolean().optional(),
  settle: SettleRequest.optional(),
});
export type KeyboardKey = z.infer<typeof KeyboardKey>;

export const MAX_TYPE_TEXT = 20000;
/**
 * The most a keyboard.type call may take, typing and settling together: the agent estimates a call before
 * sending any key and refuses one that would take longer (docs/agent-desktop.md, "Typing deadline"). The
 * control plane's 30 s agent deadline (DEFAULT_REQUEST_TIMEOUT_MS) leaves 5 s beyond it, over an estimate
 * that already assumes keystrokes three times slower than measured, so an accepted call is answered.
 */
export const TYPE_DEADLINE_MS = 25_000;
export const KeyboardType = z.strictObject({
  /** Characters to type, any Unicode. Typing the word Return types seven characters. */
  text: z.string().min(1).max(MAX_TYPE_TEXT).refine((t) => !t.includes('\0'), 'must not contain NUL'),
  /** Pause between characters, in milliseconds. */
  delay_ms: z.number().int().min(0).max(1000).default(0),
  settle: SettleRequest.optional(),
});
export type KeyboardType = z.infer<typeof KeyboardType>;

/**
 * Public `POST /v1/machines/{id}/keyboard/type`: exactly one of `text` or `secret`. `secret` names a
 * secret stored for this machine; the control plane types its value, which so never passes through the
 * caller (an AI agent's model), a response, an event or a log. The agent itself only ever sees `text`.
 */
export const KeyboardTypeFields = z.strictObject({
  text: KeyboardType.shape.text.optional(),
  secret: SecretName.optional(),
  delay_ms: KeyboardType.shape.delay_ms,
  settle: SettleRequest.optional(),
});

/** The rule of KeyboardTypeRequest, shared with the gateway's `keyboard.type` message. */
export function oneOfTextOrSecret(b: { text?: string; secret?: string }, ctx: z.RefinementCtx): void {
  if ((b.text === undefined) === (b.secret === undefined)) {
    ctx.addIssue({ code: 'custom', path: [b.text === undefined ? 'text' : 'secret'], message: 'give exactly one of text or secret' });
  }
}

export const KeyboardTypeRequest = KeyboardTypeFields.superRefine(oneOfTextOrSecret);
export type KeyboardTypeRequest = z.infer<typeof KeyboardTypeRequest>;

export const KeyboardHotkey = z.strictObject({
  /** Keys pressed together in order and released in reverse, e.g. ["ctrl", "shift", "t"]. */
  keys: z.array(KeyName).min(1).max(8),
  settle: SettleRequest.optional(),
});
export type KeyboardHotkey = z.infer<typeof KeyboardHotkey>;

/** What every pointer and keyboard route answers. */
export const InputResult = z.object({
  display: Display,
  pointer: z.object({ x: z.number().int(), y: z.number().int() }).nullable(),
  /** Only when the request asked for `settle` (extension). */
  settle: SettleResult.optional(),
});
export type InputResult = z.infer<typeof InputResult>;

export const ClipboardSelection = z.enum(['clipboard', 'primary']);
export type ClipboardSelection = z.infer<typeof ClipboardSelection>;

export const MAX_CLIPBOARD_TEXT = 1024 * 1024;
export const ClipboardWrite = z.strictObject({
  text: z.string().max(MAX_CLIPBOARD_TEXT),
  selection: ClipboardSelection.default('clipboard'),
});
export type ClipboardWrite = z.infer<typeof ClipboardWrite>;

export const ClipboardContent = z.object({
  selection: ClipboardSelection,
  /** null when the selection is empty or holds no text. */
  text: z.string().nullable(),
});
export type ClipboardContent = z.infer<typeof ClipboardContent>;

/**
 * Schemes that run script instead of naming something to open: handed to a running browser, such a URL would
 * execute in whatever page the person at the machine has open (docs/security.md, "browser/open").
 */
export const SCRIPT_URL_SCHEMES: readonly string[] = ['javascript', 'vbscript', 'livescript'];

/** An absolute URI's scheme (RFC 3986: a letter, then letters, digits, +, - or .) and then no whitespace or control character. */
const ABSOLUTE_URI = /^([A-Za-z][A-Za-z0-9+.-]*):[^\s\u0000-\u001f\u007f]*$/;

/**
 * Why `url` is not something browser/open takes, or null. The spec says a URI: any absolute URI a browser
 * parses (http, https, file, about, data, chrome, view-source, mailto…), except the script schemes. The raw
 * string must be a URI itself (no spaces or control characters), so the scheme checked is the one Chromium
 * sees: a WHATWG parser strips leading blanks and drops tabs and newlines, which would turn " javascript:…"
 * or "java\tscript:…" into a script URL.
 */
export function browserUrlProblem(url: string): string | null {
  const m = ABSOLUTE_URI.exec(url);
  if (!m) return 'must be an absolute URI (a scheme such as https: first; no spaces or control characters)';
  const scheme = m[1]!.toLowerCase();
  if (SCRIPT_URL_SCHEMES.includes(scheme)) return `${scheme}: URLs run script in the open page instead of opening one; they are refused`;
  if (!URL.canParse(url)) return 'must be a URI a browser can parse';
  return null;
}

export const BrowserOpen = z.strictObject({
  url: z
    .string()
    .max(4096)
    .superRefine((u, ctx) => {
      const problem = browserUrlProblem(u);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  new_window: z.boolean().default(false),
});
export type BrowserOpen = z.infer<typeof BrowserOpen>;

export const BrowserOpenResult = z.object({ url: z.string(), launched: z.boolean() });
export type BrowserOpenResult = z.infer<typeof BrowserOpenResult>;

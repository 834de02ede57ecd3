/**
 * Anthropic's computer-use tool (computer_20250124, computer_20251124) on a machine: one tool_use
 * input → agent calls → the tool_result content. Coordinates and screenshots are scaled as the
 * reference implementation does (scaling.ts); instead of its fixed 2 s sleep before the screenshot
 * that follows an action, the screen is waited on until it settles (docs/computer-tools.md).
 */
import type { AgentOperation } from '../../../shared/agent-protocol.js';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import type { AnthropicToolRequest, AnthropicToolResult } from '../../../shared/schemas/computer-tools.js';
import type { InputResult, Modifier, MouseButton } from '../../../shared/schemas/input.js';
import type { AgentAnswerOf } from '../services/machine-agent/index.js';
import { referenceDeclaredSize, Scaler } from './scaling.js';

/** Calls one agent operation on the machine (lease and permission already checked by the route). */
export type AgentCall = <K extends AgentOperation>(op: K, body?: unknown, query?: string) => Promise<AgentAnswerOf<K>>;

/** After an action: quiet for this long, at most this long, then the screenshot. */
export const TOOL_SETTLE = { quiet_ms: 300, timeout_ms: 3000 } as const;

const MODIFIER_NAMES: Record<string, Modifier> = {
  shift: 'shift',
  ctrl: 'ctrl',
  control: 'ctrl',
  alt: 'alt',
  super: 'super',
  meta: 'super',
  cmd: 'super',
  win: 'super',
};

const CLICKS: Partial<Record<AnthropicToolRequest['input']['action'], { button: MouseButton; count: number }>> = {
  left_click: { button: 'left', count: 1 },
  right_click: { button: 'right', count: 1 },
  middle_click: { button: 'middle', count: 1 },
  double_click: { button: 'left', count: 2 },
  triple_click: { button: 'left', count: 3 },
};

/** A mistake in the model's input: reported to the model as an error result, not to the HTTP client. */
class ToolError extends Error {}

export async function runAnthropicTool(
  req: AnthropicToolRequest,
  call: AgentCall,
  sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms)),
): Promise<AnthropicToolResult> {
  if ((req.display_width_px === undefined) !== (req.display_height_px === undefined)) {
    throw ERRORS.displaySizeHalfGiven('display_width_px', 'display_height_px', req.display_width_px === undefined ? 'display_width_px' : 'display_height_px');
  }
  // The agent's cached display (GET /display would run xrandr, ~10 ms a call); the agent re-reads the
  // mode on every input batch, and the screenshot itself is of the current mode.
  const display = (await call('health')).desktop;
  if (!display.up) throw ERRORS.desktopNotUp();
  const declared =
    req.display_width_px !== undefined && req.display_height_px !== undefined
      ? { width: req.display_width_px, height: req.display_height_px }
      : referenceDeclaredSize(display.width, display.height);
  const scaler = new Scaler(display, declared);
  const sizes = { display_width_px: declared.width, display_height_px: declared.height };
  try {
    const content = await act(req, call, scaler, sleep);
    return { content, is_error: false, ...sizes };
  } catch (e) {
    // The agent refusing the model's input (an unknown key name, say) is the model's mistake too.
    if (e instanceof ToolError || (e instanceof AppError && e.code === 'invalid_request')) {
      const details = e instanceof AppError && e.details.length ? ` (${e.details.map((d) => `${d.field}: ${d.message}`).join('; ')})` : '';
      return { content: [{ type: 'text', text: e.message + details }], is_error: true, ...sizes };
    }
    throw e;
  }
}

type Content = AnthropicToolResult['content'];

function image(b64: string): Content[number] {
  return { type: 'image', source: { type: 'base64', media_type: 'image/png', data: b64 } };
}

async function act(req: AnthropicToolRequest, call: AgentCall, scaler: Scaler, sleep: (ms: number) => Promise<void>): Promise<Content> {
  const input = req.input;
  const { action } = input;
  const D = scaler.declared;
  const settle = { ...TOOL_SETTLE, screenshot: { format: 'png' as const, width: D.width, height: D.height } };
  const screenshot = async (): Promise<Content> => [image((await call('screenshot', undefined, `format=png&width=${D.width}&height=${D.height}`)).image)];
  const settled = (r: InputResult): Content => (r.settle?.screenshot ? [image(r.settle.screenshot.image)] : []);
  const point = (c: [number, number] | undefined, field: string) => {
    if (!c) throw new ToolError(`${field} is required for ${action}`);
    const p = scaler.toScreen(c[0], c[1]);
    if (!p) throw new ToolError(`Coordinates ${c[0]}, ${c[1]} are out of bounds`);
    return p;
  };
  const modifiers = (names: string | undefined): Modifier[] | undefined => {
    if (!names) return undefined;
    return names.split('+').map((n) => {
      const m = MODIFIER_NAMES[n.trim().toLowerCase()];
      if (!m) throw new ToolError(`${n} is not a modifier key (shift, ctrl, alt, super)`);
      return m;
    });
  };
  const refuse = (field: keyof typeof input) => {
    if (input[field] !== undefined) throw new ToolError(`${field} is not accepted for ${action}`);
  };

  switch (action) {
    case 'screenshot':
      return screenshot();
    case 'wait':
      if (input.duration === undefined) throw new ToolError('duration is required for wait');
      await sleep(input.duration * 1000);
      return screenshot();
    case 'cursor_position': {
      const p = (await call('mouse.position')).pointer;
      if (!p) throw ERRORS.pointerUnknown();
      const a = scaler.toApi(p.x, p.y);
      return [{ type: 'text', text: `X=${a.x},Y=${a.y}` }];
    }
    case 'mouse_move':
      refuse('text');
      return settled(await call('mouse.move', { ...point(input.coordinate, 'coordinate'), settle }));
    case 'left_click_drag': {
      refuse('text');
      const to = point(input.coordinate, 'coordinate');
      const from = input.start_coordinate ? point(input.start_coordinate, 'start_coordinate') : undefined;
      return settled(await call('mouse.drag', { ...(from ? { from } : {}), to, settle }));
    }
    case 'left_mouse_down':
    case 'left_mouse_up':
      refuse('coordinate');
      return settled(await call('mouse.click', { button: 'left', [action === 'left_mouse_down' ? 'down' : 'up']: true, settle }));
    case 'left_click':
    case 'right_click':
    case 'middle_click':
    case 'double_click':
    case 'triple_click': {
      refuse('text');
      const c = CLICKS[action]!;
      const at = input.coordinate ? point(input.coordinate, 'coordinate') : undefined;
      return settled(await call('mouse.click', { ...(at ? { at } : {}), button: c.button, count: c.count, modifiers: modifiers(input.key), settle }));
    }
    case 'scroll': {
      if (!input.scroll_direction) throw new ToolError('scroll_direction must be up, down, left or right');
      if (input.scroll_amount === undefined) throw new ToolError('scroll_amount must be a non-negative int');
      const at = input.coordinate ? point(input.coordinate, 'coordinate') : undefined;
      if (input.scroll_amount === 0) return at ? settled(await call('mouse.move', { ...at, settle })) : screenshot();
      return settled(
        await call('mouse.scroll', { ...(at ? { at } : {}), direction: input.scroll_direction, amount: input.scroll_amount, modifiers: modifiers(input.text), settle }),
      );
    }
    case 'key': {
      refuse('coordinate');
      if (!input.text?.trim()) throw new ToolError('text is required for key');
      // xdotool syntax: space-separated keys, each a chord of names joined by "+".
      const chords = input.text.trim().split(/\s+/);
      let last: InputResult | null = null;
      for (let i = 0; i < chords.length; i++) {
        const keys = chords[i]!.split('+');
        const s = i === chords.length - 1 ? { settle } : {};
        last = keys.length === 1 ? await call('keyboard.key', { key: keys[0], ...s }) : await call('keyboard.hotkey', { keys, ...s });
      }
      return settled(last!);
    }
    case 'type':
      refuse('coordinate');
      if (!input.text) throw new ToolError('text is required for type');
      return settled(await call('keyboard.type', { text: input.text, settle }));
    case 'hold_key': {
      if (!input.text?.trim()) throw new ToolError('text is required for hold_key');
      if (input.duration === undefined) throw new ToolError('duration is required for hold_key');
      const keys = input.text.trim().split('+');
      for (const key of keys) await call('keyboard.key', { key, down: true });
      try {
        await sleep(input.duration * 1000);
      } finally {
        for (const key of [...keys].reverse()) await call('keyboard.key', { key, up: true });
      }
      return screenshot();
    }
    case 'zoom': {
      if (req.tool !== 'computer_20251124' || !req.enable_zoom) throw new ToolError('zoom needs the computer_20251124 tool with enable_zoom');
      const r = input.region;
      if (!r) throw new ToolError('region [x0, y0, x1, y1] is required for zoom');
      if (r[2] <= r[0] || r[3] <= r[1]) throw new ToolError('region must have x1 > x0 and y1 > y0');
      const a = point([r[0], r[1]], 'region');
      const b = point([r[2], r[3]], 'region');
      const w = Math.max(1, b.x - a.x);
      const h = Math.max(1, b.y - a.y);
      // The region at the declared display's size (aspect kept), so small regions are magnified.
      const f = Math.min(D.width / w, D.height / h);
      const q = `format=png&region=${a.x},${a.y},${w},${h}&width=${Math.max(1, Math.round(w * f))}&height=${Math.max(1, Math.round(h * f))}`;
      return [image((await call('screenshot', undefined, q)).image)];
    }
  }
}

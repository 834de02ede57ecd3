/**
 * OpenAI's computer use on a machine: the `action` of one `computer_call` → agent calls → the
 * `computer_call_output` with the settled screenshot (docs/computer-tools.md).
 */
import { ERRORS } from '../errors.js';
import type { OpenAIToolRequest, OpenAIToolResult } from '../../../shared/schemas/computer-tools.js';
import type { InputResult } from '../../../shared/schemas/input.js';
import { TOOL_SETTLE, type AgentCall } from './anthropic.js';

/** OpenAI's key names (lower-cased) → X keysym names; anything else is passed as is ("a", "F5"). */
export const OPENAI_KEYS: Record<string, string> = {
  '/': 'slash',
  '\\': 'backslash',
  alt: 'Alt_L',
  arrowdown: 'Down',
  arrowleft: 'Left',
  arrowright: 'Right',
  arrowup: 'Up',
  backspace: 'BackSpace',
  capslock: 'Caps_Lock',
  cmd: 'Super_L',
  ctrl: 'Control_L',
  delete: 'Delete',
  end: 'End',
  enter: 'Return',
  esc: 'Escape',
  home: 'Home',
  insert: 'Insert',
  option: 'Alt_L',
  pagedown: 'Page_Down',
  pageup: 'Page_Up',
  shift: 'Shift_L',
  space: 'space',
  super: 'Super_L',
  tab: 'Tab',
  win: 'Super_L',
};

/** Pixels of an OpenAI scroll per wheel click (Chromium scrolls about this much per notch). */
export const SCROLL_PX_PER_CLICK = 100;

/**
 * A single letter is the key, not the character: models write combos as ["CTRL", "A"], and an
 * upper-case keysym would be bound to a spare keycode that Chromium does not take as the A key.
 */
export function openAIKey(k: string): string {
  return OPENAI_KEYS[k.toLowerCase()] ?? (/^[A-Za-z]$/.test(k) ? k.toLowerCase() : k);
}

/** Wheel clicks for a pixel delta: at least one for any movement, at most 100. */
export function wheelClicks(px: number): number {
  return px === 0 ? 0 : Math.min(100, Math.max(1, Math.round(Math.abs(px) / SCROLL_PX_PER_CLICK)));
}

export async function runOpenAITool(req: OpenAIToolRequest, call: AgentCall): Promise<OpenAIToolResult> {
  if ((req.display_width === undefined) !== (req.display_height === undefined)) {
    throw ERRORS.displaySizeHalfGiven('display_width', 'display_height', req.display_width === undefined ? 'display_width' : 'display_height');
  }
  // The agent's cached display (GET /display would run xrandr, ~10 ms a call); the agent re-reads the
  // mode on every input batch, and the screenshot itself is of the current mode.
  const display = (await call('health')).desktop;
  if (!display.up) throw ERRORS.desktopNotUp();
  const D = { width: req.display_width ?? display.width, height: req.display_height ?? display.height };
  const pt = (x: number, y: number, field: string) => {
    if (x >= D.width || y >= D.height) {
      throw ERRORS.outsideDisplay(x, y, D.width, D.height, field);
    }
    return { x: Math.round((x * display.width) / D.width), y: Math.round((y * display.height) / D.height) };
  };
  const settle = { ...TOOL_SETTLE, screenshot: { format: 'png' as const, width: D.width, height: D.height } };
  const a = req.action;
  let r: InputResult | null = null;
  switch (a.type) {
    case 'click':
      if (a.button === 'back' || a.button === 'forward') {
        await call('mouse.move', pt(a.x, a.y, 'action.x'));
        r = await call('keyboard.hotkey', { keys: ['alt', a.button === 'back' ? 'Left' : 'Right'], settle });
      } else {
        r = await call('mouse.click', { at: pt(a.x, a.y, 'action.x'), button: a.button === 'wheel' ? 'middle' : a.button, settle });
      }
      break;
    case 'double_click':
      r = await call('mouse.click', { at: pt(a.x, a.y, 'action.x'), count: 2, settle });
      break;
    case 'move':
      r = await call('mouse.move', { ...pt(a.x, a.y, 'action.x'), settle });
      break;
    case 'drag': {
      // A path: press at the first point, move through the others, release at the last.
      const pts = a.path.map((p, i) => pt(p.x, p.y, `action.path.${i}`));
      await call('mouse.click', { at: pts[0], down: true });
      try {
        for (const p of pts.slice(1)) await call('mouse.move', p);
      } finally {
        r = await call('mouse.click', { up: true, settle });
      }
      break;
    }
    case 'keypress': {
      const keys = a.keys.map(openAIKey);
      r = keys.length === 1 ? await call('keyboard.key', { key: keys[0], settle }) : await call('keyboard.hotkey', { keys, settle });
      break;
    }
    case 'scroll': {
      const at = pt(a.x, a.y, 'action.x');
      const v = wheelClicks(a.scroll_y);
      const h = wheelClicks(a.scroll_x);
      if (v) r = await call('mouse.scroll', { at, direction: a.scroll_y > 0 ? 'down' : 'up', amount: v, ...(h ? {} : { settle }) });
      if (h) r = await call('mouse.scroll', { at, direction: a.scroll_x > 0 ? 'right' : 'left', amount: h, settle });
      if (!v && !h) r = await call('mouse.move', { ...at, settle });
      break;
    }
    case 'type':
      r = await call('keyboard.type', { text: a.text, settle });
      break;
    case 'wait': {
      // "Wait" means: let the screen finish what it is doing. A move to where the pointer already is
      // changes nothing and carries the settle.
      const p = (await call('mouse.position')).pointer;
      if (p) r = await call('mouse.move', { ...p, settle });
      break;
    }
    case 'screenshot':
      break;
  }
  const image = r?.settle?.screenshot?.image ?? (await call('screenshot', undefined, `format=png&width=${D.width}&height=${D.height}`)).image;
  return { type: 'computer_call_output', call_id: req.call_id ?? null, output: { type: 'computer_screenshot', image_url: `data:image/png;base64,${image}` } };
}


/**
 * The xdotool command lines of each input operation: pure functions of validated input and resolved
 * keycodes (literal tests in desktop-input-script-unit.test.ts). Desktop resolves keycodes, holds the
 * display's input lock and runs the batches; every line here is generated, never caller text.
 */
import type { MouseButton, MouseScroll, Point } from '../../../shared/schemas/input.js';

export const BUTTONS: Record<MouseButton, number> = { left: 1, middle: 2, right: 3 };
export const WHEEL: Record<MouseScroll['direction'], number> = { up: 4, down: 5, left: 6, right: 7 };
/** Keys per xdotool command line; keeps lines short whatever the text length. */
export const KEYS_PER_LINE = 200;

/** Modifier keycodes pressed in order and released in reverse. */
export interface ModifierLines {
  down: string[];
  up: string[];
}

export function modifierLines(keycodes: number[]): ModifierLines {
  return { down: keycodes.map((kc) => `keydown --delay 0 ${kc}`), up: [...keycodes].reverse().map((kc) => `keyup --delay 0 ${kc}`) };
}

export function chunkLines(prefix: string, tokens: string[]): string[] {
  const lines: string[] = [];
  for (let i = 0; i < tokens.length; i += KEYS_PER_LINE) lines.push(`${prefix} ${tokens.slice(i, i + KEYS_PER_LINE).join(' ')}`);
  return lines;
}

/**
 * A click as batches, to be run with a pause between them. A multi-click is one press per batch (see
 * Desktop.mouseClick for why); modifiers go down in the first batch and up in the last.
 */
export function clickBatches(req: { at?: Point; button: MouseButton; count: number; down?: boolean; up?: boolean }, mods: ModifierLines): string[][] {
  const b = BUTTONS[req.button];
  const press = req.down ? `mousedown ${b}` : req.up ? `mouseup ${b}` : `click --repeat 1 --delay 0 ${b}`;
  const count = req.down || req.up ? 1 : req.count;
  const batches: string[][] = [[...(req.at ? [`mousemove ${req.at.x} ${req.at.y}`] : []), ...mods.down, press]];
  for (let i = 1; i < count; i++) batches.push([press]);
  batches[batches.length - 1]!.push(...mods.up);
  return batches;
}

/** Press at `from`, `steps` evenly spaced moves ending at `to`, release. */
export function dragLines(from: Point, to: Point, steps: number, button: MouseButton, mods: ModifierLines): string[] {
  const b = BUTTONS[button];
  const lines = [`mousemove ${from.x} ${from.y}`, ...mods.down, `mousedown ${b}`];
  for (let i = 1; i <= steps; i++) {
    const x = Math.round(from.x + ((to.x - from.x) * i) / steps);
    const y = Math.round(from.y + ((to.y - from.y) * i) / steps);
    lines.push(`mousemove ${x} ${y}`);
  }
  lines.push(`mouseup ${b}`, ...mods.up);
  return lines;
}

export function scrollLines(req: { at?: Point; direction: MouseScroll['direction']; amount: number }, mods: ModifierLines): string[] {
  return [...(req.at ? [`mousemove ${req.at.x} ${req.at.y}`] : []), ...mods.down, `click --repeat ${req.amount} --delay 0 ${WHEEL[req.direction]}`, ...mods.up];
}

export function keyLines(keycode: number, req: { down?: boolean; up?: boolean; repeat: number }): string[] {
  if (req.down) return [`keydown --delay 0 ${keycode}`];
  if (req.up) return [`keyup --delay 0 ${keycode}`];
  return chunkLines('key --delay 0', Array<string>(req.repeat).fill(String(keycode)));
}

export function hotkeyLines(keycodes: number[]): string[] {
  const m = modifierLines(keycodes);
  return [...m.down, ...m.up];
}

/** Strokes of a typing round: `shift` is the layout's Shift keycode for strokes that need it. */
export function typeLines(strokes: Array<{ keycode: number; shift: boolean }>, shift: number | null, delayMs: number): string[] {
  const tokens = strokes.map((s) => (s.shift ? `${shift}+${s.keycode}` : String(s.keycode)));
  if (delayMs === 0) return chunkLines('key --delay 0', tokens);
  return tokens.flatMap((t) => [`key --delay 0 ${t}`, `sleep ${(delayMs / 1000).toFixed(3)}`]);
}

/**
 * Browser keyboard events → the input channel's messages (pure). Printable characters without a command
 * modifier are typed as text (so any layout and any Unicode works); named keys map to X keysym names;
 * a combination with ctrl/alt/meta is a hotkey.
 */
export type KeyMessage =
  | { type: 'keyboard.type'; text: string }
  | { type: 'keyboard.key'; key: string }
  | { type: 'keyboard.hotkey'; keys: string[] };

const NAMED: Record<string, string> = {
  Enter: 'Return',
  Backspace: 'BackSpace',
  Tab: 'Tab',
  Escape: 'Escape',
  Delete: 'Delete',
  Insert: 'Insert',
  Home: 'Home',
  End: 'End',
  PageUp: 'Page_Up',
  PageDown: 'Page_Down',
  ArrowLeft: 'Left',
  ArrowRight: 'Right',
  ArrowUp: 'Up',
  ArrowDown: 'Down',
  ' ': 'space',
};

export function keyMessage(e: { key: string; ctrlKey: boolean; altKey: boolean; metaKey: boolean; shiftKey: boolean }): KeyMessage | null {
  if (['Shift', 'Control', 'Alt', 'Meta', 'CapsLock', 'AltGraph', 'Dead', 'Unidentified'].includes(e.key)) return null;
  const fn = /^F([1-9]|1[0-2])$/.test(e.key) ? e.key : null;
  const named = NAMED[e.key] ?? fn;
  if (e.ctrlKey || e.altKey || e.metaKey) {
    const key = named ?? (e.key.length === 1 && /^[A-Za-z0-9]$/.test(e.key) ? e.key.toLowerCase() : null);
    if (!key) return null;
    const mods = [e.ctrlKey && 'ctrl', e.altKey && 'alt', e.metaKey && 'super', e.shiftKey && 'shift'].filter((m): m is string => !!m);
    return { type: 'keyboard.hotkey', keys: [...mods, key] };
  }
  if (e.key === ' ') return { type: 'keyboard.type', text: ' ' };
  if (named) return { type: 'keyboard.key', key: named };
  if ([...e.key].length === 1) return { type: 'keyboard.type', text: e.key };
  return null;
}

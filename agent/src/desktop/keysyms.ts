import { KEYSYM_TABLE } from './keysym-table.js';

let byName: Map<string, number> | null = null;

function table(): Map<string, number> {
  if (!byName) {
    byName = new Map();
    for (const entry of KEYSYM_TABLE.split(' ')) {
      const i = entry.indexOf(':');
      const name = entry.slice(0, i);
      // The first definition of a name wins, as in libX11.
      if (!byName.has(name)) byName.set(name, parseInt(entry.slice(i + 1), 16));
    }
  }
  return byName;
}

/** xdotool's aliases (case-insensitive), kept so callers can write ctrl+shift+t as they would with xdotool. */
const ALIASES: Record<string, string> = {
  alt: 'Alt_L',
  ctrl: 'Control_L',
  control: 'Control_L',
  meta: 'Meta_L',
  super: 'Super_L',
  shift: 'Shift_L',
};

/** XStringToKeysym plus xdotool's aliases; null when the name is not a keysym. */
export function keysymFromName(name: string): number | null {
  const alias = ALIASES[name.toLowerCase()];
  if (alias) return table().get(alias)!;
  const v = table().get(name);
  if (v !== undefined) return v;
  // libX11 also accepts Unicode keysyms written U<hex> and raw values written 0x<hex>.
  let m = /^U([0-9A-Fa-f]{4,6})$/.exec(name);
  if (m) {
    const cp = parseInt(m[1]!, 16);
    if (cp <= 0x10ffff) return cp < 0x100 ? cp : 0x1000000 + cp;
  }
  m = /^0x([0-9A-Fa-f]{1,8})$/.exec(name);
  if (m) return parseInt(m[1]!, 16);
  return null;
}

/** The keysym that types one Unicode code point. */
export function keysymForCodePoint(cp: number): number {
  switch (cp) {
    case 0x0a:
    case 0x0d:
      return 0xff0d; // Return
    case 0x09:
      return 0xff09; // Tab
    case 0x08:
      return 0xff08; // BackSpace
    case 0x1b:
      return 0xff1b; // Escape
  }
  // Latin-1 keysyms equal their code points; everything else uses the Unicode keysym range.
  if ((cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff)) return cp;
  return 0x1000000 + cp;
}

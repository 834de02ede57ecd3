/**
 * Keysym → keycode resolution against the live keyboard mapping, binding keysyms that the layout
 * does not have onto spare keycodes.
 *
 * Why not `xdotool type`: for a character missing from the keymap it binds a scratch keycode,
 * sends the key and reverts the binding at once. Xlib clients re-read the mapping lazily when they
 * handle the key event, by which time it is reverted, so they see the wrong character. And xdotool
 * caches the mapping at its start, so after a layout change (setxkbmap de) even ASCII comes out
 * wrong (y/z swapped). Here the mapping is read through our own X connection and re-read whenever
 * a MappingNotify says it changed; bindings stay in place after use (least recently used spare
 * keycodes are recycled, never one used within SETTLE_MS), and xdotool is given raw keycodes.
 */
import type { TypingCost } from './typing-budget.js';
import type { KeyboardMapping } from './x11-keymap.js';

/** What the resolver needs of an X connection (X11KeymapClient; a snapshot for dry runs). */
export interface KeymapSource {
  /** Bumped whenever the mapping may have changed. */
  readonly generation: number;
  getMapping(): Promise<KeyboardMapping>;
  /** Set each keycode's levels; resolves with the mapping after the change. */
  bind(entries: Array<{ keycode: number; levels: number[] }>, keysymsPerKeycode: number): Promise<KeyboardMapping>;
}

export interface KeyStroke {
  keycode: number;
  /** Hold Shift (the layout's own Shift key) around this key. */
  shift: boolean;
}

const XK_SHIFT_L = 0xffe1;
/** Keycodes below 10 are single digits, which xdotool would read as keysym names (0-9). */
const MIN_USABLE_KEYCODE = 10;
/** A spare keycode used less than this long ago is not rebound: the client may not have read its key event yet (a loaded machine delays clients by hundreds of ms). */
export const SETTLE_MS = 1000;
/** After binding, before the first key on the new bindings: time for clients to read the MappingNotify. */
export const BIND_SETTLE_MS = 100;

/**
 * Keysyms that may share a spare keycode, the second on the Shift level: Unicode keysyms beyond
 * Latin-1 (what keysymForCodePoint gives every character outside Latin-1). Two per keycode doubles
 * what one bind round holds (18 spare keycodes under Xvfb's US layout: 36 characters).
 */
export function pairable(ks: number): boolean {
  return ks >= 0x1000100 && ks <= 0x110ffff;
}

/**
 * The levels written for a binding: one keysym on every level, or a pair as level 1 and the Shift level
 * of the first two groups ([a, b, a, b], the rest NoSymbol).
 */
export function bindingLevels(keysyms: number[], kpk: number): number[] {
  const levels = new Array<number>(kpk).fill(0);
  if (keysyms.length === 1) return levels.fill(keysyms[0]!);
  for (let l = 0; l < Math.min(4, kpk); l++) levels[l] = keysyms[l % 2]!;
  return levels;
}

/**
 * A binding left by an earlier agent on this display, as its keysyms: one character keysym on its
 * first four levels, or a pair of Unicode keysyms beyond Latin-1 as [a, b, a, b]. Layouts use the
 * first shape only for function keys (BackSpace, F1, KP_Add, ...), checked for us, de, fr, ru and jp;
 * they write their own scripts with legacy keysyms (Cyrillic_a, Greek_alpha, ...), so the second shape
 * is a layout's key only in the few layouts written in U+ keysyms (some Indic ones). Taking such a key
 * back costs the layout that key for physical keyboards only: all input here arrives by keysym.
 */
function ourBinding(m: KeyboardMapping, kc: number): number[] | null {
  const kpk = m.keysymsPerKeycode;
  if (kpk < 4) return null;
  const base = (kc - m.minKeycode) * kpk;
  const at = (l: number) => m.keysyms[base + l]!;
  const ks = at(0);
  const isChar = (ks >= 0x20 && ks < 0xff00) || (ks >= 0x1000100 && ks <= 0x110ffff);
  if (!isChar) return null;
  const want = at(1) !== ks && pairable(ks) && pairable(at(1)) ? [ks, at(1)] : [ks];
  const levels = bindingLevels(want, kpk);
  for (let l = 0; l < kpk; l++) if (at(l) !== levels[l] && !(l >= 4 && at(l) === 0)) return null;
  return want;
}

interface Slot {
  /** One keysym (every level) or two (the second with Shift). */
  keysyms: number[];
  lastUsed: number;
}

export class KeycodeResolver {
  private mapping: KeyboardMapping | null = null;
  private gen = -1;
  private where = new Map<number, { keycode: number; level: 0 | 1 }>();
  private spare: number[] = [];
  private shiftKeycode: number | null = null;
  private readonly slots = new Map<number, Slot>();
  private readonly held = new Set<number>();

  constructor(
    private readonly x: KeymapSource,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  /** Spare keycodes the resolver may bind (keys of the layout with no keysym, and our own bindings). */
  get spareCount(): number {
    return this.spare.length;
  }

  setHeld(keycode: number, down: boolean): void {
    if (down) this.held.add(keycode);
    else this.held.delete(keycode);
  }

  touch(strokes: KeyStroke[]): void {
    const now = Date.now();
    for (const s of strokes) {
      const slot = this.slots.get(s.keycode);
      if (slot) slot.lastUsed = now;
    }
  }

  private async fresh(): Promise<void> {
    if (this.mapping && this.gen === this.x.generation) return;
    const m = await this.x.getMapping();
    this.index(m);
  }

  private index(m: KeyboardMapping): void {
    this.mapping = m;
    // Recorded after the reply: a change made before our request has already bumped it.
    this.gen = this.x.generation;
    const kpk = m.keysymsPerKeycode;
    const at = (kc: number, l: number) => m.keysyms[(kc - m.minKeycode) * kpk + l]!;
    this.where.clear();
    this.spare = [];
    this.shiftKeycode = null;
    for (let kc = m.minKeycode; kc <= m.maxKeycode; kc++) {
      const slot = this.slots.get(kc);
      if (slot) {
        // XKB reports the levels its key type has and NoSymbol for the rest.
        const want = slot.keysyms;
        let intact = at(kc, 0) === want[0] && (want.length === 1 || at(kc, 1) === want[1]);
        for (let l = want.length; l < kpk; l++) if (at(kc, l) !== 0 && !want.includes(at(kc, l))) intact = false;
        // A layout change replaced the whole map; our binding is gone.
        if (!intact) this.slots.delete(kc);
      }
      if (kc < MIN_USABLE_KEYCODE) continue;
      if (!this.slots.has(kc)) {
        const ours = ourBinding(m, kc);
        if (ours) this.slots.set(kc, { keysyms: ours, lastUsed: 0 });
      }
      // Only keycodes with no keysym at all are spare. A keycode carrying only vendor keysyms
      // (XF86Back, XF86Reload, XF86Copy, ...) is not: clients derive the physical key from the keycode
      // (Chromium's DOM code), and Chromium acts on Back/Forward/Reload/HomePage/Copy/Paste/Cut by
      // that whatever keysym is bound, so a character typed there navigates or pastes instead.
      let spare = true;
      for (let l = 0; l < kpk; l++) if (at(kc, l) !== 0) spare = false;
      if (spare || this.slots.has(kc)) this.spare.push(kc);
      const l0 = at(kc, 0);
      const l1 = kpk > 1 ? at(kc, 1) : 0;
      if (l0 === XK_SHIFT_L && this.shiftKeycode === null) this.shiftKeycode = kc;
      if (l0 !== 0 && this.where.get(l0)?.level !== 0) this.where.set(l0, { keycode: kc, level: 0 });
      if (l1 !== 0 && l1 !== l0 && !this.where.has(l1)) this.where.set(l1, { keycode: kc, level: 1 });
    }
  }

  private locate(ks: number, allowShift: boolean): KeyStroke | null {
    const w = this.where.get(ks);
    if (!w) return null;
    if (w.level === 0) return { keycode: w.keycode, shift: false };
    if (allowShift && this.shiftKeycode !== null) return { keycode: w.keycode, shift: true };
    return null;
  }

  /**
   * Strokes for a prefix of `keysyms` starting at `start`, binding what is missing. Returns how far
   * it got: when more distinct missing keysyms are needed than there are spare keycodes, the rest
   * is for another round after these strokes were sent (and `touch`ed).
   */
  async plan(keysyms: number[], start: number, allowShift: boolean): Promise<{ strokes: KeyStroke[]; next: number }> {
    await this.fresh();
    const strokes: KeyStroke[] = [];
    const missing = new Map<number, number[]>(); // keysym -> indexes into strokes
    const usedSlots = new Set<number>();
    const usable = () => this.spare.filter((kc) => !this.held.has(kc) && !usedSlots.has(kc)).length;
    // Two missing keysyms share a keycode when both are pairable and the layout has a Shift key.
    const pairing = allowShift && this.shiftKeycode !== null;
    const shares = (ks: number) => pairing && pairable(ks);
    let singles = 0;
    let paired = 0;
    const needed = (s: number, p: number) => s + Math.ceil(p / 2);
    let i = start;
    for (; i < keysyms.length; i++) {
      const ks = keysyms[i]!;
      const found = this.locate(ks, allowShift);
      if (found) {
        const isSlot = this.slots.has(found.keycode);
        if (isSlot && !usedSlots.has(found.keycode)) {
          usedSlots.add(found.keycode);
          if (needed(singles, paired) > usable()) {
            usedSlots.delete(found.keycode);
            break;
          }
        }
        strokes.push(found);
        continue;
      }
      const pending = missing.get(ks);
      if (pending) {
        pending.push(strokes.length);
        strokes.push({ keycode: 0, shift: false });
        continue;
      }
      const s2 = singles + (shares(ks) ? 0 : 1);
      const p2 = paired + (shares(ks) ? 1 : 0);
      if (needed(s2, p2) > usable()) break;
      singles = s2;
      paired = p2;
      missing.set(ks, [strokes.length]);
      strokes.push({ keycode: 0, shift: false });
    }
    if (i === start && start < keysyms.length) throw new Error('no spare keycode to bind a key to');
    if (missing.size) {
      const candidates = this.spare
        .filter((kc) => !this.held.has(kc) && !usedSlots.has(kc))
        .sort((a, b) => (this.slots.get(a)?.lastUsed ?? -1) - (this.slots.get(b)?.lastUsed ?? -1))
        .slice(0, needed(singles, paired));
      const newest = Math.max(-1, ...candidates.map((kc) => this.slots.get(kc)?.lastUsed ?? -1));
      const wait = newest + SETTLE_MS - Date.now();
      if (newest >= 0 && wait > 0) await this.sleep(wait);
      const keysyms = [...missing.keys()];
      const groups = [...keysyms.filter((ks) => !shares(ks)).map((ks) => [ks])];
      const sharing = keysyms.filter(shares);
      for (let j = 0; j < sharing.length; j += 2) groups.push(sharing.slice(j, j + 2));
      const entries = groups.map((g, n) => ({ keycode: candidates[n]!, keysyms: g }));
      const kpk = this.mapping!.keysymsPerKeycode;
      // One request per run of adjacent keycodes, all sent before the one round trip that reads the result.
      const m = await this.x.bind(
        entries.map((e) => ({ keycode: e.keycode, levels: bindingLevels(e.keysyms, kpk) })),
        kpk,
      );
      const now = Date.now();
      for (const e of entries) this.slots.set(e.keycode, { keysyms: e.keysyms, lastUsed: now });
      this.index(m);
      // Clients apply a new mapping when they get to its MappingNotify, not when the server does:
      // Chromium translates keys through GDK's own X connection, whose keymap follows on GDK's
      // main loop. A key sent at once can be read with the old mapping (a recycled keycode gives
      // the previous character, a fresh one nothing), so the new bindings are left to settle first.
      await this.sleep(BIND_SETTLE_MS);
      for (const e of entries) {
        e.keysyms.forEach((ks, level) => {
          const got = this.locate(ks, level === 1);
          if (!got || got.keycode !== e.keycode || got.shift !== (level === 1)) throw new Error('the X server did not take a key binding');
          for (const idx of missing.get(ks)!) strokes[idx] = got;
        });
      }
    }
    return { strokes, next: i };
  }

  /**
   * Keystrokes and binding waits typing `keysyms` would take from the current state, found by running
   * the same plans on a copy over a snapshot of the mapping: nothing is sent, no time passes (so every
   * recycled keycode counts its whole SETTLE_MS: an upper bound).
   */
  async costOf(keysyms: number[]): Promise<TypingCost> {
    await this.fresh();
    let waitMs = 0;
    const dry = new KeycodeResolver(new SnapshotKeymap(this.mapping!), async (ms) => {
      waitMs += ms;
    });
    for (const [kc, slot] of this.slots) dry.slots.set(kc, { ...slot });
    for (const kc of this.held) dry.held.add(kc);
    let strokes = 0;
    for (let start = 0; start < keysyms.length; ) {
      const plan = await dry.plan(keysyms, start, true);
      dry.touch(plan.strokes);
      strokes += plan.strokes.length;
      start = plan.next;
    }
    return { strokes, waitMs };
  }

  /** Keycodes for keys that must all be down together (hotkey, key down/up): no Shift tricks. */
  async resolveAll(keysyms: number[]): Promise<number[]> {
    const { strokes, next } = await this.plan(keysyms, 0, false);
    if (next < keysyms.length) throw new Error('not enough spare keycodes for this key combination');
    return strokes.map((s) => s.keycode);
  }

  /** The layout's Shift key, for strokes with `shift`. */
  get shift(): number | null {
    return this.shiftKeycode;
  }
}

/** A copy of a mapping that binds change in memory only (KeycodeResolver.costOf's dry run). */
class SnapshotKeymap implements KeymapSource {
  readonly generation = 0;
  private readonly m: KeyboardMapping;

  constructor(m: KeyboardMapping) {
    this.m = { ...m, keysyms: m.keysyms.slice() };
  }

  async getMapping(): Promise<KeyboardMapping> {
    return this.m;
  }

  async bind(entries: Array<{ keycode: number; levels: number[] }>, kpk: number): Promise<KeyboardMapping> {
    for (const e of entries) for (let l = 0; l < kpk; l++) this.m.keysyms[(e.keycode - this.m.minKeycode) * kpk + l] = e.levels[l] ?? 0;
    return this.m;
  }
}

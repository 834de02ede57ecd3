/**
 * The machine's desktop as the agent sees it: one X display that the image's init started (the
 * agent never starts or stops Xvfb, so an agent restart never kills the desktop).
 */
import fs from 'node:fs';
import { AppError, type FieldError } from '../../../shared/errors.js';
import { DEFAULT_SCREENSHOT_QUALITY, type Display, type ScreenshotView } from '../../../shared/schemas/display.js';
import type {
  ClipboardSelection,
  InputResult,
  KeyboardHotkey,
  KeyboardKey,
  KeyboardType,
  Modifier,
  MouseClick,
  MouseDrag,
  MouseMove,
  MouseScroll,
  Point,
  SettleRequest,
} from '../../../shared/schemas/input.js';
import type { LogSink } from '../http/log.js';
import { Browser, type BrowserConfig } from './browser.js';
import { readSelection, writeSelection } from './clipboard.js';
import { KeycodeResolver, type KeyStroke } from './keycodes.js';
import { keysymForCodePoint, keysymFromName } from './keysyms.js';
import { FramebufferReader, encodeRgb, type ImageFormat, type RawFrame } from './screen.js';
import { clickBatches, dragLines, hotkeyLines, keyLines, modifierLines, scrollLines, typeLines, type ModifierLines } from './input-script.js';
import { DisplayWatch } from './display-watch.js';
import { typingEstimateMs, typingRefusal, type TypingCost } from './typing-budget.js';
import { waitSettled } from './settle.js';
import { planView, type ViewRequest } from './view.js';
import { X11KeymapClient } from './x11-keymap.js';
import { LatestStartedRead } from './mode-reads.js';
import { xrandrModes, type ScreenModes, type ScreenModesIo } from './xrandr.js';
import { Xdotool } from './xdotool.js';
import { ERRORS } from '../errors.js';

export interface DesktopOptions {
  /** X display name, ":N". */
  display: string;
  /** Where that display's Xvfb writes Xvfb_screen0. */
  fbdir: string;
  log: LogSink;
  browser: BrowserConfig;
  /** How often the display's state is checked. */
  pollMs?: number;
  /**
   * A file the image's init creates once the display is up in its default mode. Until it exists the
   * display is left alone and desktop requests wait (`whenStarted`): the agent starts in parallel with Xvfb,
   * and a display seen before init switched it down from Xvfb's start size would report the wrong size.
   */
  readyFile?: string;
  /** How long after start desktop requests wait for readyFile (default 30 s). */
  readyTimeoutMs?: number;
  /** Reading and switching modes (default: xrandr). */
  modes?: ScreenModesIo;
}

/** The left-hand key of each modifier, as any layout names it. */
const MODIFIER_KEYSYMS: Record<Modifier, number> = { shift: 0xffe1, ctrl: 0xffe3, alt: 0xffe9, super: 0xffeb };
/** Between the presses of a multi-click: well inside any double-click time (Chromium: 500 ms), never the same millisecond. */
export const REPEAT_GAP_MS = 10;

export class Desktop {
  readonly displayName: string;
  private readonly displayNumber: number;
  private readonly socketPath: string;
  private readonly fb: FramebufferReader;
  private readonly xdo: Xdotool;
  private readonly browser: Browser;
  private x: X11KeymapClient | null = null;
  private resolver: KeycodeResolver | null = null;
  private modes: ScreenModes | null = null;
  private lastSize = { width: 0, height: 0 };
  private readonly modesIo: ScreenModesIo;
  /** Which mode read may set `modes`/`lastSize` (every read goes through readModes/connect). */
  private readonly modeReads = new LatestStartedRead();
  private readonly watch: DisplayWatch;
  private inputChain: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly listeners = new Set<() => void>();
  private warmed = false;

  constructor(private readonly opts: DesktopOptions) {
    const m = /^:(\d+)(\.\d+)?$/.exec(opts.display);
    if (!m) throw new Error('display must look like :N');
    this.displayName = opts.display;
    this.displayNumber = Number(m[1]);
    this.socketPath = `/tmp/.X11-unix/X${this.displayNumber}`;
    this.fb = new FramebufferReader(opts.fbdir);
    this.xdo = new Xdotool(opts.display);
    this.browser = new Browser(opts.browser, opts.display);
    this.modesIo = opts.modes ?? xrandrModes;
    this.watch = new DisplayWatch({
      log: opts.log,
      readyFile: opts.readyFile,
      readyTimeoutMs: opts.readyTimeoutMs,
      pollMs: opts.pollMs,
      probe: {
        present: () => fs.existsSync(this.socketPath) && this.fb.exists(),
        healthy: () => !!this.x && !this.x.isClosed && this.fb.exists() && fs.existsSync(this.socketPath),
        connect: () => this.connect(),
        cameUp: () => this.cameUp(),
        down: () => this.goDown(),
      },
    });
  }

  /** See DisplayWatch.start. */
  start(): Promise<void> {
    return this.watch.start();
  }

  /** See DisplayWatch.whenStarted. */
  whenStarted(): Promise<void> {
    return this.watch.whenStarted();
  }

  close(): void {
    this.closed = true;
    this.watch.close();
    this.xdo.close();
    this.x?.close();
    this.x = null;
    this.listeners.clear();
  }

  /** Called whenever up/down or the size changes. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private emit(): void {
    for (const fn of this.listeners) fn();
  }

  get isUp(): boolean {
    return this.watch.up;
  }

  private get up(): boolean {
    return this.watch.up;
  }

  /** The display as last observed (no X round trip). */
  get state(): Display {
    return {
      width: this.lastSize.width,
      height: this.lastSize.height,
      up: this.up,
      resizable: this.up && !!this.modes?.output,
    };
  }

  /** Re-check now whether the desktop answers (coalesced with a check already running). */
  check(): Promise<void> {
    return this.watch.check();
  }

  /** The watch's connect: an X connection for keymaps and the screen modes; true when both are had. */
  private async connect(): Promise<boolean> {
    let x: X11KeymapClient | null = null;
    // xrandr is a child process: start it first so it runs while the connection is set up.
    const ticket = this.modeReads.begin();
    const modesP = this.modesIo.read(this.displayName);
    modesP.catch(() => {}); // awaited below
    try {
      x = await X11KeymapClient.connect(this.displayNumber, () => {
        if (x && x.isClosed && this.x === x) void this.check();
      });
      const modes = await modesP;
      if (this.closed) {
        x.close();
        return false;
      }
      this.x = x;
      this.resolver = new KeycodeResolver(x);
      this.applyModes(ticket, modes);
      // The display may have restarted: xdotool's connection belongs to the old server.
      this.xdo.reset();
      return true;
    } catch {
      x?.close();
      return false;
    }
  }

  private cameUp(): void {
    this.opts.log({ event: 'desktop', up: true, width: this.lastSize.width, height: this.lastSize.height });
    this.emit();
    if (!this.warmed) {
      this.warmed = true;
      void this.warmUp();
    }
  }

  /**
   * One throwaway screenshot when the display first comes up: the first capture and encode pay for
   * growing buffers, compiling code paths and libvips' first JPEG (~10 ms), which would otherwise land
   * on the first real screenshot, usually the one a client waits on right after start.
   */
  private async warmUp(): Promise<void> {
    try {
      const frame = await this.fb.capture(this.lastSize.width, this.lastSize.height);
      try {
        await encodeRgb(frame.rgb, frame.width, frame.height, 'jpeg', 80);
      } finally {
        this.fb.release(frame);
      }
    } catch {
      // Only a warm-up: a real request will report whatever is wrong.
    }
  }

  private goDown(): void {
    this.x?.close();
    this.x = null;
    this.resolver = null;
    this.xdo.reset();
    this.opts.log({ event: 'desktop', up: false });
    this.emit();
  }

  /** Read the modes now; the answer is applied unless a read that started later was applied first. */
  private async readModes(): Promise<void> {
    const ticket = this.modeReads.begin();
    const m = await this.modesIo.read(this.displayName);
    this.applyModes(ticket, m);
  }

  private applyModes(ticket: number, m: ScreenModes): void {
    if (!this.modeReads.keep(ticket)) return;
    const changed = m.width !== this.lastSize.width || m.height !== this.lastSize.height;
    this.modes = m;
    this.lastSize = { width: m.width, height: m.height };
    if (changed && this.up) this.emit();
  }

  requireUp(): void {
    if (!this.up) {
      throw ERRORS.desktopNotUp();
    }
  }

  /** An operation failed: if it was because the display went away, say so (retryable). */
  private async failure(err: unknown): Promise<never> {
    if (err instanceof AppError) throw err;
    await this.check();
    this.requireUp();
    throw ERRORS.desktopFailed(err);
  }

  // ------------------------------------------------------------------------------ display

  /**
   * Not under the input lock (it would wait behind a long typing call): a read overlapping a resize
   * or an input call's re-read is ordered by when it started (mode-reads.ts).
   */
  async getDisplay(): Promise<Display> {
    this.requireUp();
    try {
      await this.readModes();
    } catch (e) {
      return this.failure(e);
    }
    return this.state;
  }

  async resize(width: number, height: number): Promise<Display> {
    this.requireUp();
    const modes = this.modes!;
    const details: FieldError[] = [];
    if (width > modes.maxWidth) details.push({ field: 'width', message: `must be at most ${modes.maxWidth} (the display's maximum)` });
    if (height > modes.maxHeight) details.push({ field: 'height', message: `must be at most ${modes.maxHeight} (the display's maximum)` });
    if (details.length) {
      throw ERRORS.modeTooLarge(width, height, modes.maxWidth, modes.maxHeight, details);
    }
    if (!modes.output) throw ERRORS.noRandR();
    return this.withInput(async () => {
      try {
        // The modes as of now (an earlier resize may have added the mode meanwhile); the read starts
        // after the switch, so any read that started before it can no longer replace its answer.
        await this.modesIo.switchTo(this.displayName, this.modes ?? modes, width, height);
        await this.readModes();
      } catch (e) {
        return this.failure(e);
      }
      return this.state;
    });
  }

  // ------------------------------------------------------------------------------ screen

  /** Raw RGB of the current mode. */
  async capture(): Promise<RawFrame> {
    this.requireUp();
    const { width, height } = this.lastSize;
    try {
      return await this.fb.capture(width, height);
    } catch (e) {
      return this.failure(e);
    }
  }

  /** Return a captured frame's buffer for reuse (it must not be used afterwards). */
  releaseFrame(frame: RawFrame): void {
    this.fb.release(frame);
  }

  async screenshot(format: ImageFormat, quality: number, want: ViewRequest = {}): Promise<{ image: Buffer; display: Display; view?: ScreenshotView }> {
    const display = this.state;
    // Checked against the mode before capturing; the frame is of that same mode.
    planView(display, want);
    const frame = await this.capture();
    let image: Buffer;
    let view: ScreenshotView | null;
    try {
      view = planView(frame, want);
      image = await encodeRgb(frame.rgb, frame.width, frame.height, format, quality, view);
    } finally {
      this.releaseFrame(frame);
    }
    return { image, display: { ...display, width: frame.width, height: frame.height }, ...(view ? { view } : {}) };
  }

  // ------------------------------------------------------------------------------ input

  /**
   * Extension: run an input, then wait for the screen to settle (settle.ts) and add what changed,
   * optionally with the settled screenshot. The wait is outside the input lock: it only reads the
   * framebuffer. The screenshot's view is checked before the input is sent.
   */
  private async withSettle(settle: SettleRequest | undefined, act: () => Promise<InputResult>): Promise<InputResult> {
    if (!settle) return act();
    if (settle.screenshot) planView(this.state, settle.screenshot);
    const before = await this.capture();
    try {
      const r = await act();
      const o = await waitSettled(() => this.capture(), (f) => this.releaseFrame(f), before, Date.now(), settle);
      try {
        const want = settle.screenshot;
        let screenshot: NonNullable<InputResult['settle']>['screenshot'];
        if (want) {
          const view = planView(o.last, want);
          const image = await encodeRgb(o.last.rgb, o.last.width, o.last.height, want.format, want.quality ?? DEFAULT_SCREENSHOT_QUALITY, view);
          screenshot = { image: image.toString('base64'), format: want.format, ...(view ? { view } : {}) };
        }
        const { settled, duration_ms, changed, changed_box } = o;
        return { ...r, settle: { settled, duration_ms, changed, changed_box, ...(screenshot ? { screenshot } : {}) } };
      } finally {
        this.releaseFrame(o.last);
      }
    } finally {
      this.releaseFrame(before);
    }
  }

  /** Input operations run one at a time per display, in arrival order. */
  private withInput<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.inputChain.then(fn);
    this.inputChain = next.catch(() => {});
    return next;
  }

  private checkPoint(p: Point, prefix: string, details: FieldError[]): void {
    const { width, height } = this.lastSize;
    if (p.x >= width) details.push({ field: `${prefix}x`, message: `must be less than the display width ${width}` });
    if (p.y >= height) details.push({ field: `${prefix}y`, message: `must be less than the display height ${height}` });
  }

  private refuseOffDisplay(points: Array<[Point | undefined, string]>): void {
    const details: FieldError[] = [];
    for (const [p, prefix] of points) if (p) this.checkPoint(p, prefix, details);
    if (details.length) {
      throw ERRORS.outsideDisplay(this.lastSize.width, this.lastSize.height, details);
    }
  }

  private async xdoRun(lines: string[], expectedMs = 0): Promise<InputResult> {
    try {
      const r = await this.xdo.run(lines, expectedMs);
      // Every line is generated here from validated input, so a complaint is our bug, not the caller's.
      if (r.errors.length) throw new Error('xdotool rejected a generated command');
      // xdotool's marker is a round trip, so the server has applied the batch: the pointer read
      // now (on our own connection) is where the batch left it.
      const x = this.x;
      if (!x) this.requireUp();
      const pointer = await x!.queryPointer();
      if (r.screen.width !== this.lastSize.width || r.screen.height !== this.lastSize.height) {
        // Another X client switched modes; coordinates must follow the real screen.
        await this.readModes();
      }
      return { display: this.state, pointer };
    } catch (e) {
      return this.failure(e);
    }
  }

  /** The pointer and display, nothing sent (an empty batch is still a round trip). */
  mousePosition(): Promise<InputResult> {
    this.requireUp();
    return this.withInput(() => this.xdoRun([]));
  }

  mouseMove(req: MouseMove): Promise<InputResult> {
    this.requireUp();
    this.refuseOffDisplay([[req, '']]);
    return this.withSettle(req.settle, () => this.withInput(() => this.xdoRun([`mousemove ${req.x} ${req.y}`])));
  }

  /**
   * keydown lines for `mods` and the matching keyup lines (reverse order), resolved against the live
   * keymap. The caller puts both in the same input operation (under the display's input lock), so
   * nothing else is sent while they are held.
   */
  private async modifierLines(mods: Modifier[] | undefined): Promise<ModifierLines> {
    if (!mods?.length) return { down: [], up: [] };
    const resolver = this.resolverOrFail();
    let kcs: number[];
    try {
      kcs = await resolver.resolveAll(mods.map((m) => MODIFIER_KEYSYMS[m]));
    } catch (e) {
      return this.failure(e);
    }
    resolver.touch(kcs.map((keycode) => ({ keycode, shift: false })));
    return modifierLines(kcs);
  }

  mouseClick(req: MouseClick): Promise<InputResult> {
    this.requireUp();
    if (req.down && req.up) {
      throw ERRORS.downAndUp([{ field: 'up', message: 'cannot be combined with down' }]);
    }
    this.refuseOffDisplay([[req.at, 'at.']]);
    return this.withSettle(req.settle, () => this.withInput(async () => {
      const batches = clickBatches(req, await this.modifierLines(req.modifiers));
      // A double/triple click is one click per batch, REPEAT_GAP_MS apart. Clients count a press as a
      // repeat only if its server timestamp differs from the previous press's (Chromium compares
      // them and ignores equal ones), and the X server stamps events in milliseconds when it processes
      // them: presses sent back to back (`click --repeat N --delay 0`) share a timestamp, and even a
      // sleep inside one xdotool batch does not help when the server reads both presses at once. Each
      // batch ends with a round trip, so the server has stamped this press before the gap starts.
      let r = await this.xdoRun(batches[0]!);
      for (const batch of batches.slice(1)) {
        await new Promise((res) => setTimeout(res, REPEAT_GAP_MS));
        r = await this.xdoRun(batch);
      }
      return r;
    }));
  }

  mouseDrag(req: MouseDrag): Promise<InputResult> {
    this.requireUp();
    this.refuseOffDisplay([
      [req.from, 'from.'],
      [req.to, 'to.'],
    ]);
    return this.withSettle(req.settle, () => this.withInput(async () => {
      const from = req.from ?? (await this.xdoRun([])).pointer!;
      return this.xdoRun(dragLines(from, req.to, req.steps, req.button, await this.modifierLines(req.modifiers)));
    }));
  }

  mouseScroll(req: MouseScroll): Promise<InputResult> {
    this.requireUp();
    this.refuseOffDisplay([[req.at, 'at.']]);
    return this.withSettle(req.settle, () => this.withInput(async () => {
      return this.xdoRun(scrollLines(req, await this.modifierLines(req.modifiers)));
    }));
  }

  private keysymOrRefuse(name: string, field: string): number {
    const ks = keysymFromName(name);
    if (ks === null) {
      throw ERRORS.unknownKeyName([{ field, message: 'is not an X keysym name (e.g. Return, Tab, F6, a, ctrl)' }]);
    }
    return ks;
  }

  private resolverOrFail(): KeycodeResolver {
    const r = this.resolver;
    if (!r) this.requireUp();
    return r!;
  }

  key(req: KeyboardKey): Promise<InputResult> {
    this.requireUp();
    if (req.down && req.up) {
      throw ERRORS.downAndUp([{ field: 'up', message: 'cannot be combined with down' }]);
    }
    const ks = this.keysymOrRefuse(req.key, 'key');
    return this.withSettle(req.settle, () => this.withInput(async () => {
      const resolver = this.resolverOrFail();
      let kc: number;
      try {
        [kc] = (await resolver.resolveAll([ks])) as [number];
      } catch (e) {
        return this.failure(e);
      }
      const r = await this.xdoRun(keyLines(kc, req));
      if (req.down || req.up) resolver.setHeld(kc, !!req.down);
      resolver.touch([{ keycode: kc, shift: false }]);
      return r;
    }));
  }

  hotkey(req: KeyboardHotkey): Promise<InputResult> {
    this.requireUp();
    const syms = req.keys.map((k, i) => this.keysymOrRefuse(k, `keys.${i}`));
    return this.withSettle(req.settle, () => this.withInput(async () => {
      const resolver = this.resolverOrFail();
      let kcs: number[];
      try {
        kcs = await resolver.resolveAll(syms);
      } catch (e) {
        return this.failure(e);
      }
      const r = await this.xdoRun(hotkeyLines(kcs));
      resolver.touch(kcs.map((keycode) => ({ keycode, shift: false })));
      return r;
    }));
  }

  type(req: KeyboardType): Promise<InputResult> {
    this.requireUp();
    const syms = Array.from(req.text, (ch) => keysymForCodePoint(ch.codePointAt(0)!));
    return this.withSettle(req.settle, () => this.withInput(async () => {
      const resolver = this.resolverOrFail();
      // Refused before any key is sent when it cannot finish within the deadline; once started it is carried out whole.
      let cost: TypingCost;
      try {
        cost = await resolver.costOf(syms);
      } catch (e) {
        return this.failure(e);
      }
      const refusal = typingRefusal(typingEstimateMs(cost, req.delay_ms, req.settle?.timeout_ms ?? 0), req.delay_ms);
      if (refusal) throw refusal;
      let result: InputResult | null = null;
      for (let start = 0; start < syms.length; ) {
        let plan: { strokes: KeyStroke[]; next: number };
        try {
          plan = await resolver.plan(syms, start, true);
        } catch (e) {
          return this.failure(e);
        }
        result = await this.xdoRun(typeLines(plan.strokes, resolver.shift, req.delay_ms), plan.strokes.length * req.delay_ms);
        resolver.touch(plan.strokes);
        start = plan.next;
      }
      return result!;
    }));
  }

  // ------------------------------------------------------------------------------ clipboard, browser

  async clipboardGet(selection: ClipboardSelection): Promise<string | null> {
    this.requireUp();
    try {
      return await readSelection(this.displayName, selection);
    } catch (e) {
      return this.failure(e);
    }
  }

  async clipboardSet(selection: ClipboardSelection, text: string): Promise<void> {
    this.requireUp();
    try {
      await writeSelection(this.displayName, selection, text);
    } catch (e) {
      return this.failure(e);
    }
  }

  async browserOpen(url: string, newWindow: boolean): Promise<{ launched: boolean }> {
    this.requireUp();
    try {
      return await this.browser.open(url, newWindow);
    } catch (e) {
      return this.failure(e);
    }
  }

  /** The running browser's pid (from its profile lock), for tests and diagnostics. */
  browserPid(): number | null {
    return this.browser.runningPid();
  }
}

export async function createDesktop(opts: DesktopOptions): Promise<Desktop> {
  const d = new Desktop(opts);
  await d.start();
  return d;
}

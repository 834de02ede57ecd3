/**
 * Whether the display is up, and the waiting around it: the init's ready file (the display is left
 * alone until it exists), the start-up wait desktop requests join, the periodic check, and checks
 * coalesced so two callers never connect twice. What "connect" and "healthy" mean (an X connection,
 * the framebuffer file, xrandr's modes) is the desktop's (`DisplayProbe`), so this module only sequences.
 */
import fs from 'node:fs';
import type { LogSink } from '../http/log.js';
import { ERRORS } from '../errors.js';

export interface DisplayProbe {
  /** The display's socket and framebuffer exist (worth trying to connect). */
  present(): boolean;
  /** While up: the connection and files are still there. */
  healthy(): boolean;
  /** Try to bring the display up (connect, read modes); true when it is up. Never throws. */
  connect(): Promise<boolean>;
  /** It is up now (`up` already reads true). */
  cameUp(): void;
  /** It was up and is not any more: drop what belongs to the old display. */
  down(): void;
}

export interface DisplayWatchOptions {
  probe: DisplayProbe;
  log: LogSink;
  /** See DesktopOptions.readyFile. */
  readyFile?: string;
  /** How long after start requests wait for readyFile (default 30 s). */
  readyTimeoutMs?: number;
  /** How often the display's state is checked (default 500 ms). */
  pollMs?: number;
}

const DEFAULT_READY_TIMEOUT_MS = 30_000;
/** The ready file is polled this often while requests may be waiting on it. */
const READY_POLL_MS = 5;

export class DisplayWatch {
  private upNow = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  /** Whether the init has said the display is ready (always, without a ready file). */
  private gateOpen: boolean;
  /** The start-up wait for the display, while it runs; desktop requests join it. */
  private startup: Promise<void> | null = null;
  private startupTimedOut = false;

  constructor(private readonly opts: DisplayWatchOptions) {
    this.gateOpen = !opts.readyFile;
  }

  get up(): boolean {
    return this.upNow;
  }

  /**
   * Without a ready file: resolves once the display has been checked. With one: resolves at once and
   * the display is brought up in the background as soon as the file appears.
   */
  async start(): Promise<void> {
    if (this.opts.readyFile) {
      this.startup = this.awaitReady().finally(() => {
        this.startup = null;
      });
    } else {
      await this.check();
    }
    this.timer = setInterval(() => void this.check(), this.opts.pollMs ?? 500);
    this.timer.unref();
  }

  private async awaitReady(): Promise<void> {
    const end = Date.now() + (this.opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
    while (!this.closed && Date.now() < end) {
      if (this.readyGate()) {
        await this.check();
        if (this.upNow) return;
      }
      await new Promise((r) => setTimeout(r, READY_POLL_MS));
    }
    if (!this.closed && !this.upNow) {
      this.startupTimedOut = true;
      this.opts.log({ event: 'desktop', up: false, reason: this.gateOpen ? 'display_not_answering' : 'ready_file_missing' });
    }
  }

  /** Whether the display may be used yet (the ready file, once seen, stays seen). */
  private readyGate(): boolean {
    if (!this.gateOpen && fs.existsSync(this.opts.readyFile!)) this.gateOpen = true;
    return this.gateOpen;
  }

  /**
   * For requests: while the display is still coming up after start, wait for it (at most until the
   * start-up wait ends), so an early request gets the real display rather than a 503. A no-op
   * without a ready file; whether the display is up is still each operation's requireUp.
   */
  async whenStarted(): Promise<void> {
    if (!this.upNow && this.startup) await this.startup;
    if (!this.upNow && this.startupTimedOut && !this.gateOpen) {
      throw ERRORS.displayNotReady();
    }
  }

  /** Re-check now whether the display answers (coalesced with a check already running). */
  check(): Promise<void> {
    if (!this.checking) {
      this.checking = this.checkNow().finally(() => {
        this.checking = null;
      });
    }
    return this.checking;
  }

  private async checkNow(): Promise<void> {
    if (this.closed) return;
    const p = this.opts.probe;
    if (this.upNow) {
      if (p.healthy()) return;
      this.upNow = false;
      p.down();
      return;
    }
    if (!this.readyGate() || !p.present()) return;
    if ((await p.connect()) && !this.closed) {
      this.upNow = true;
      p.cameUp();
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
  }
}

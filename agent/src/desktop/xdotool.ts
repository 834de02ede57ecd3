/**
 * The one long-lived `xdotool -` process of a display: commands are lines on its stdin (~0.1 ms)
 * instead of a process per action (7-100 ms).
 *
 * Synchronisation: every batch ends with `getdisplaygeometry`. It makes a round trip to the X
 * server (GetGeometry of the root window), so its output line means the server has processed
 * everything xdotool sent before it; it also reports the screen size. (`getmouselocation` would
 * also give the pointer, but it walks the window tree and xdotool dies of BadWindow when a window
 * under the pointer closes meanwhile — which a key that ends an application does.) stderr is merged
 * into stdout so an error line always arrives before the marker of its own batch, and stdout is
 * line-buffered so the marker is never held back.
 */
import type { ChildProcess } from 'node:child_process';
import { spawnClean } from '../spawn/clean-spawn.js';

export interface XdoResult {
  /** The root window's size when the batch completed (the current mode). */
  screen: { width: number; height: number };
  /** Lines xdotool printed other than the marker (its complaints). */
  errors: string[];
}

const MARKER = /^(\d+) (\d+)$/;
const BATCH_TIMEOUT_MS = 10_000;
/**
 * Xlib's report of an X error and its indented detail lines: not about our commands (they name no
 * windows), so not the caller's fault either.
 */
const X_ERROR_REPORT = /^(X Error of failed request|\s)/;

interface Waiter {
  resolve(r: XdoResult): void;
  reject(e: Error): void;
  errors: string[];
  timer: NodeJS.Timeout;
}

export class Xdotool {
  private proc: ChildProcess | null = null;
  private partial = '';
  private waiter: Waiter | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(private readonly display: string) {}

  /** Drop the process (display went away, or it misbehaved); the next batch starts a new one. */
  reset(): void {
    const p = this.proc;
    this.proc = null;
    this.partial = '';
    if (p && p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    this.failWaiter(new Error('xdotool was restarted'));
  }

  close(): void {
    this.closed = true;
    this.reset();
  }

  /** Run command lines as one batch, after every batch queued before it. */
  run(lines: string[], expectedMs = 0): Promise<XdoResult> {
    const next = this.chain.then(() => this.runNow(lines, BATCH_TIMEOUT_MS + expectedMs));
    this.chain = next.catch(() => {});
    return next;
  }

  private start(): ChildProcess {
    // Only xdotool's output comes back here, and it is parsed, never logged: it can echo key names.
    const { child: p } = spawnClean('sh', ['-c', 'exec stdbuf -oL xdotool - 2>&1'], {
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', DISPLAY: this.display, LC_ALL: 'C.UTF-8' },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    p.stdout!.setEncoding('utf8');
    p.stdout!.on('data', (d: string) => this.onOutput(p, d));
    p.stdin!.on('error', () => {});
    p.on('error', () => this.onExit(p));
    p.on('exit', () => this.onExit(p));
    return p;
  }

  private onExit(p: ChildProcess): void {
    if (this.proc !== p) return;
    this.proc = null;
    this.partial = '';
    this.failWaiter(new Error('xdotool exited'));
  }

  private failWaiter(e: Error): void {
    const w = this.waiter;
    this.waiter = null;
    if (w) {
      clearTimeout(w.timer);
      w.reject(e);
    }
  }

  private onOutput(p: ChildProcess, d: string): void {
    if (this.proc !== p) return;
    this.partial += d;
    let nl: number;
    while ((nl = this.partial.indexOf('\n')) >= 0) {
      const line = this.partial.slice(0, nl);
      this.partial = this.partial.slice(nl + 1);
      const w = this.waiter;
      if (!w) continue;
      const m = MARKER.exec(line);
      if (m) {
        this.waiter = null;
        clearTimeout(w.timer);
        w.resolve({ screen: { width: Number(m[1]), height: Number(m[2]) }, errors: w.errors });
      } else if (line.trim() && !X_ERROR_REPORT.test(line)) {
        w.errors.push(line);
      }
    }
  }

  private runNow(lines: string[], timeoutMs: number): Promise<XdoResult> {
    if (this.closed) return Promise.reject(new Error('xdotool is closed'));
    for (const l of lines) if (l.includes('\n')) return Promise.reject(new Error('xdotool command contains a newline'));
    if (!this.proc) this.proc = this.start();
    const p = this.proc;
    return new Promise<XdoResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        // A batch that never completes means xdotool is wedged: replace it.
        if (this.proc === p) this.reset();
      }, timeoutMs);
      this.waiter = { resolve, reject, errors: [], timer };
      p.stdin!.write(lines.concat('getdisplaygeometry', '').join('\n'));
    });
  }
}

/**
 * Stand up the agent with the desktop routes over the real channel (HTTP/2 on a unix socket)
 * against a real Xvfb, for the desktop tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type http2 from 'node:http2';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { createAgentApp } from '../../agent/src/app.js';
import { closeAgentServer, createAgentServer } from '../../agent/src/channel/server.js';
import { listenUnix } from '../../agent/src/channel/unix-socket.js';
import { createDesktop, type Desktop } from '../../agent/src/desktop/desktop.js';
import type { LogLine } from '../../agent/src/http/log.js';
import { desktopRoutes } from '../../agent/src/routes/desktop.js';
import { readModes, switchMode, type ScreenModes, type ScreenModesIo } from '../../agent/src/desktop/xrandr.js';
import { H2Client } from './h2-client.js';
import { startXvfb, type TestDisplay } from './xvfb.js';
import { enrolledWith } from './agent-enrollment.js';

export const DESKTOP_TOKEN = 'tok_desktop_' + 'k'.repeat(32);

export interface DesktopAgent {
  xvfb: TestDisplay;
  desktop: Desktop;
  client: H2Client;
  socket: string;
  /** The agent's HTTP/2 server and its unix-socket listener (closed at teardown; closing again is harmless). */
  server: http2.Http2Server;
  listener: net.Server;
  lines: LogLine[];
  /** Start an X client on the test display; killed at teardown. */
  x(cmd: string, args: string[], env?: Record<string, string>): ChildProcess;
}

/**
 * `readyFile`/`readyTimeoutMs`: the agent's --display-ready wait (see desktop-ready.test.ts); `modes`: the
 * desktop's mode reads and switches (real xrandr either way; see heldModeReads).
 */
export async function startDesktopAgent(
  t: Test,
  opts: { pollMs?: number; readyFile?: string; readyTimeoutMs?: number; modes?: ScreenModesIo } = {},
): Promise<DesktopAgent> {
  const xvfb = await startXvfb();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-desktop-'));
  const socket = path.join(dir, 'agent.sock');
  const lines: LogLine[] = [];
  const log = (l: LogLine) => lines.push(l);
  const desktop = await createDesktop({
    display: xvfb.display,
    fbdir: xvfb.fbdir,
    log,
    browser: { command: 'chromium', sandbox: false, userName: 'agent' },
    pollMs: opts.pollMs,
    readyFile: opts.readyFile,
    readyTimeoutMs: opts.readyTimeoutMs,
    modes: opts.modes,
  });
  const app = createAgentApp({ enrollment: enrolledWith(DESKTOP_TOKEN), log, mounts: [desktopRoutes(desktop)] });
  const server = createAgentServer(app, log);
  const listener = await listenUnix(server, socket);
  const client = new H2Client(socket, DESKTOP_TOKEN);
  const children: ChildProcess[] = [];
  t.teardown(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    // The agent side ends first: a stream a subtest left open would keep the client's graceful close waiting.
    await closeAgentServer(server, listener);
    await client.close();
    desktop.close();
    await xvfb.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    xvfb,
    desktop,
    client,
    socket,
    server,
    listener,
    lines,
    x(cmd, args, env = {}) {
      const c = spawn(cmd, args, {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DISPLAY: xvfb.display, ...env },
        stdio: 'ignore',
      });
      children.push(c);
      return c;
    },
  };
}

/** Poll until `fn` answers something truthy; that value (never null, undefined, false, 0 or '') is returned. */
export async function waitFor<T>(fn: () => T | Promise<T>, ms = 10_000, every = 50): Promise<Exclude<T, null | undefined | false | 0 | ''>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v as Exclude<T, null | undefined | false | 0 | ''>;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Run an X client to completion on the test display. */
export function xrun(display: string, cmd: string, args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DISPLAY: display }, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    p.stdout!.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code: code ?? -1, stdout: out }));
  });
}

export interface HeldRead {
  /** Resolves with what the server answered once the held read has it (it is not returned yet). */
  held: Promise<ScreenModes>;
  /** Let the held read return its answer to the desktop. */
  release(): void;
}

/**
 * The real xrandr reads and switches, with a way to order a read against a mode switch: `hold()` arms
 * the next read to finish — it gets the server's answer, then waits until `release()` before handing it
 * back. So a test makes a read that saw the old mode answer only after a switch (and its own read) went
 * through: the overlap that otherwise only happens by chance, with xrandr slow under load.
 */
export function heldModeReads(): { io: ScreenModesIo; hold(): HeldRead } {
  const armed: Array<{ got(m: ScreenModes): void; gate: Promise<void> }> = [];
  return {
    io: {
      async read(display) {
        const m = await readModes(display);
        const h = armed.shift();
        if (h) {
          h.got(m);
          await h.gate;
        }
        return m;
      },
      switchTo: switchMode,
    },
    hold() {
      let got!: (m: ScreenModes) => void;
      let release!: () => void;
      const held = new Promise<ScreenModes>((r) => (got = r));
      const gate = new Promise<void>((r) => (release = r));
      armed.push({ got, gate });
      return { held, release };
    },
  };
}

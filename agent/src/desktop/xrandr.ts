/** Display modes through xrandr (RandR on Xvfb: one output, modes up to the size Xvfb started with). */
import { runClean } from '../spawn/clean-spawn.js';

export interface ScreenModes {
  width: number;
  height: number;
  maxWidth: number;
  maxHeight: number;
  /** The RandR output (Xvfb calls it `screen`); null when RandR reports none. */
  output: string | null;
  modes: string[];
}

function run(display: string, args: string[]): Promise<{ code: number; stdout: string }> {
  return runClean('xrandr', args, { env: { PATH: '/usr/local/bin:/usr/bin:/bin', DISPLAY: display }, timeoutMs: 10_000 }).then((r) => ({
    code: r.code ?? 1,
    stdout: r.stdout,
  }));
}

export function parseXrandr(text: string): ScreenModes {
  const screen = /current (\d+) x (\d+), maximum (\d+) x (\d+)/.exec(text);
  if (!screen) throw new Error('xrandr printed no screen line');
  const out: ScreenModes = {
    width: Number(screen[1]),
    height: Number(screen[2]),
    maxWidth: Number(screen[3]),
    maxHeight: Number(screen[4]),
    output: null,
    modes: [],
  };
  let inOutput = false;
  for (const line of text.split('\n')) {
    const o = /^(\S+) connected/.exec(line);
    if (o) {
      if (out.output === null) {
        out.output = o[1]!;
        inOutput = true;
      } else inOutput = false;
      continue;
    }
    if (/^\S/.test(line)) inOutput = false;
    const m = /^ {3}(\S+)\s/.exec(line);
    if (m && inOutput) out.modes.push(m[1]!);
  }
  return out;
}

export async function readModes(display: string): Promise<ScreenModes> {
  const r = await run(display, ['--current']);
  if (r.code !== 0) throw new Error('xrandr failed');
  return parseXrandr(r.stdout);
}

/**
 * Switch to a width x height mode, creating it if needed. The caller checks the size against the
 * maximum first; the server refuses modes larger than its framebuffer. Resolves once the server has
 * switched (xrandr exits after its request is answered); the caller reads the modes afterwards, so
 * that read starts after the switch (see mode-reads.ts).
 */
export async function switchMode(display: string, current: ScreenModes, width: number, height: number): Promise<void> {
  if (!current.output) throw new Error('no RandR output');
  const name = `${width}x${height}`;
  if (!current.modes.includes(name)) {
    // Xvfb ignores timings: a mode is just a size. --newmode fails harmlessly if the mode exists
    // but is not yet on the output.
    await run(display, ['--newmode', name, '0', String(width), '0', '0', '0', String(height), '0', '0', '0']);
    await run(display, ['--addmode', current.output, name]);
  }
  const r = await run(display, ['--output', current.output, '--mode', name]);
  if (r.code !== 0) throw new Error('xrandr could not switch modes');
}

/** The desktop's way to the display's modes (xrandr; tests wrap it to order reads against switches). */
export interface ScreenModesIo {
  read(display: string): Promise<ScreenModes>;
  switchTo(display: string, current: ScreenModes, width: number, height: number): Promise<void>;
}

export const xrandrModes: ScreenModesIo = { read: readModes, switchTo: switchMode };

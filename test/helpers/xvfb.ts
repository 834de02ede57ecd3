/**
 * A real Xvfb per test file: started at the largest size with -fbdir (as the guest image does),
 * on a free display number, killed when the test ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestDisplay {
  display: string; // ":N"
  number: number;
  fbdir: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

export const XVFB_MAX_WIDTH = 2560;
export const XVFB_MAX_HEIGHT = 1600;

function displayFree(n: number): boolean {
  return !fs.existsSync(`/tmp/.X${n}-lock`) && !fs.existsSync(`/tmp/.X11-unix/X${n}`);
}

async function waitFor(pred: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return pred();
}

export async function startXvfb(opts: { width?: number; height?: number } = {}): Promise<TestDisplay> {
  const width = opts.width ?? XVFB_MAX_WIDTH;
  const height = opts.height ?? XVFB_MAX_HEIGHT;
  const fbdir = fs.mkdtempSync(path.join(os.tmpdir(), 'xvfb-fb-'));
  let n = 100 + ((process.pid * 7) % 800);
  for (let attempt = 0; attempt < 50; attempt++, n++) {
    if (!displayFree(n)) continue;
    const proc = spawn('Xvfb', [`:${n}`, '-screen', '0', `${width}x${height}x24`, '-fbdir', fbdir, '-noreset', '-nolisten', 'tcp'], {
      stdio: 'ignore',
    });
    let exited = false;
    proc.once('exit', () => (exited = true));
    const ok = await waitFor(() => exited || (fs.existsSync(`/tmp/.X11-unix/X${n}`) && fs.existsSync(path.join(fbdir, 'Xvfb_screen0'))), 10_000);
    if (!ok || exited) {
      if (!exited) proc.kill('SIGKILL');
      continue;
    }
    return {
      display: `:${n}`,
      number: n,
      fbdir,
      proc,
      async stop() {
        if (proc.exitCode === null) {
          proc.kill('SIGTERM');
          await new Promise((r) => proc.once('exit', r));
        }
        fs.rmSync(fbdir, { recursive: true, force: true });
      },
    };
  }
  throw new Error('could not start Xvfb on a free display');
}

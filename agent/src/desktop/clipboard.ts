/**
 * Clipboard through xclip. Text passes through stdin/stdout only: never argv (visible in ps), never
 * a log line.
 */
import { spawnClean } from '../spawn/clean-spawn.js';

export type Selection = 'clipboard' | 'primary';

const TIMEOUT_MS = 5_000;
const MAX_READ = 16 * 1024 * 1024;

function env(display: string): NodeJS.ProcessEnv {
  return { PATH: '/usr/local/bin:/usr/bin:/bin', DISPLAY: display, LC_ALL: 'C.UTF-8' };
}

/** The selection's text, or null when nobody owns it or it holds no text. */
export function readSelection(display: string, selection: Selection): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const { child: p, started } = spawnClean('xclip', ['-o', '-selection', selection, '-t', 'UTF8_STRING'], {
      env: env(display),
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error('xclip did not answer (selection owner unresponsive)'));
    }, TIMEOUT_MS);
    p.stdout!.on('data', (d: Buffer) => {
      size += d.length;
      if (size > MAX_READ) {
        tooBig = true;
        p.kill('SIGKILL');
      } else chunks.push(d);
    });
    started.catch((e) => {
      clearTimeout(timer);
      reject(e);
    });
    p.on('close', (code) => {
      clearTimeout(timer);
      if (tooBig) return reject(new Error('selection is larger than the agent reads'));
      // xclip exits 1 when the selection is empty or has no UTF8_STRING target.
      resolve(code === 0 ? Buffer.concat(chunks).toString('utf8') : null);
    });
  });
}

/**
 * Own the selection with `text`. xclip forks a child that keeps serving the selection and the
 * parent exits once it has read stdin; the child must not inherit our pipes (execFile would wait
 * for them forever), hence stdout/stderr 'ignore'.
 */
export async function writeSelection(display: string, selection: Selection, text: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const { child: p, started } = spawnClean('xclip', ['-i', '-selection', selection], { env: env(display), stdio: ['pipe', 'ignore', 'ignore'] });
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error('xclip did not take the selection'));
    }, TIMEOUT_MS);
    p.stdin!.on('error', () => {});
    started.catch((e) => {
      clearTimeout(timer);
      reject(e);
    });
    p.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`xclip exited with ${code}`));
    });
    p.stdin!.end(text, 'utf8');
  });
  // The forked child takes ownership after the parent exits; wait until the server says it has.
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const now = await readSelection(display, selection).catch(() => null);
    if (now === text) return;
    if (Date.now() > deadline) throw new Error('selection did not change');
    await new Promise((r) => setTimeout(r, 10));
  }
}

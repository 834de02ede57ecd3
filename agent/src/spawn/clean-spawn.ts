/**
 * Every process the agent starts goes through `computer-spawn` (agent/native/computer-spawn.c), which
 * closes every fd above 2 before it execs the program.
 *
 * Security invariant: no agent fd reaches a spawned process. node-pty opens pty masters without
 * close-on-exec (and Node has no fcntl to fix that), so without this step every later exec, terminal
 * and browser process inherited the masters of the open terminals, and an `agent`-user process could
 * type into a root terminal. libuv marks its own fds close-on-exec; the masters are the ones it does
 * not own, but the helper closes everything, whatever opened it.
 *
 * The helper reports a failed exec through a status pipe (fd 3), so callers still see "could not
 * start" (ENOENT, EACCES, ...) as an error with that code, as with a plain spawn.
 */
import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { contentKey, devLibexecBase, installArtifact } from './dev-libexec.js';

export const SPAWN_HELPER_NAME = 'computer-spawn';

const execFileAsync = promisify(execFile);

/**
 * The app root: `<root>/agent/src/spawn/clean-spawn.ts` when run from source, `<root>/dist/agent/src/spawn/...js`
 * when compiled (a checkout's dist, or the image's `/opt/computer/dist`), so three or four levels up.
 */
function rootCandidates(): string[] {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return [path.resolve(here, '../../..'), path.resolve(here, '../../../..')];
}

/** The compiler's arguments: static, since the binary is built on the host and must run on the guest's libc too. */
const CC_ARGS = ['-static', '-O2', '-s'];

function cc(source: string, out: string): void {
  execFileSync('cc', [...CC_ARGS, '-o', out, source], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Builds the helper into the image's `<app>/libexec` (image.ts). */
export async function compileSpawnHelper(source: string, out: string): Promise<void> {
  await fs.promises.mkdir(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  // Not execFileSync: the image is staged by a control plane that serves and heartbeats meanwhile.
  await execFileAsync('cc', [...CC_ARGS, '-o', tmp, source]);
  await fs.promises.chmod(tmp, 0o755);
  await fs.promises.rename(tmp, out);
}

/**
 * Where the helper comes from, for an app root (pure given what exists): a checkout has its C source, and builds
 * it outside itself (dev-libexec.ts: the agent user runs it, and may not be able to enter the checkout); the
 * image has it prebuilt in `libexec/` and no source.
 */
export type HelperSource = { kind: 'build'; checkout: string; source: string } | { kind: 'prebuilt'; bin: string };

export function helperSource(root: string, exists: (p: string) => boolean): HelperSource | null {
  const source = path.join(root, 'agent', 'native', `${SPAWN_HELPER_NAME}.c`);
  if (exists(source)) return { kind: 'build', checkout: root, source };
  const bin = path.join(root, 'libexec', SPAWN_HELPER_NAME);
  return exists(bin) ? { kind: 'prebuilt', bin } : null;
}

let helperPath: string | null = null;

/**
 * The helper's path. A development checkout builds it on first use (like the guest image, which is built by
 * tests on first use) into `<libexec base>/<sha16 of flags and source>/`; the image ships it prebuilt. Missing and
 * unbuildable: throw, so nothing is ever started without it.
 */
export function spawnHelper(): string {
  if (helperPath) return helperPath;
  for (const root of rootCandidates()) {
    const src = helperSource(root, (p) => fs.existsSync(p));
    if (src?.kind === 'prebuilt') return (helperPath = src.bin);
    if (src?.kind === 'build') {
      const key = contentKey([CC_ARGS.join(' '), fs.readFileSync(src.source)]);
      const base = devLibexecBase(process.getuid?.() ?? 0, src.checkout);
      return (helperPath = installArtifact({ base, key, name: SPAWN_HELPER_NAME, mode: 0o755, write: (tmp) => cc(src.source, tmp) }));
    }
  }
  throw new Error(`${SPAWN_HELPER_NAME} is missing`);
}

const errnoNames = new Map<number, string>(Object.entries(os.constants.errno).map(([k, v]) => [v, k]));

export interface CleanChild {
  child: ChildProcess;
  /**
   * Resolves once the program itself runs (exec succeeded); rejects with an Error whose `code` is
   * the errno name (ENOENT, EACCES, ...) when it could not be started.
   */
  started: Promise<void>;
}

function stdioTriple(s: StdioOptions | undefined): StdioOptions {
  if (s === undefined) return ['pipe', 'pipe', 'pipe'];
  if (typeof s === 'string') return [s, s, s];
  return s.slice(0, 3);
}

/** `spawn(file, args, opts)` with no fd above 2 in the program. `opts.stdio` may name fds 0-2 only. */
export function spawnClean(file: string, args: readonly string[], opts: SpawnOptions = {}): CleanChild {
  const stdio = [...(stdioTriple(opts.stdio) as unknown[]), 'pipe'] as StdioOptions;
  const child = spawn(spawnHelper(), ['3', file, ...args], { ...opts, stdio });
  const status = child.stdio[3] as NodeJS.ReadableStream | null | undefined;
  const started = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    if (!status) return reject(new Error('no status pipe'));
    let text = '';
    status.setEncoding('utf8');
    status.on('data', (d: string) => {
      if (text.length < 16) text += d;
    });
    status.on('error', () => {});
    status.on('close', () => {
      if (!text) return resolve();
      const errno = Number(text);
      const code = errnoNames.get(errno) ?? 'EUNKNOWN';
      const err = new Error(`could not start ${file}: ${code}`) as NodeJS.ErrnoException;
      err.code = code;
      err.errno = errno;
      reject(err);
    });
  });
  // A caller that only cares about exit must not crash on an unobserved rejection.
  started.catch(() => {});
  return { child, started };
}

/**
 * execFile's job through the helper: run to completion, collect bounded stdout, kill at the timeout.
 * Rejects when the program could not be started; a non-zero exit is a result.
 */
export function runClean(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; maxStdout?: number } = {},
): Promise<{ code: number | null; stdout: string }> {
  const { child, started } = spawnClean(file, args, { env: opts.env, stdio: ['ignore', 'pipe', 'ignore'] });
  const max = opts.maxStdout ?? 1024 * 1024;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 10_000);
    child.stdout!.on('data', (d: Buffer) => {
      if (size < max) chunks.push(d.subarray(0, max - size));
      size += d.length;
    });
    started.catch((e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      started.then(() => resolve({ code, stdout: Buffer.concat(chunks).toString('utf8') }), () => {});
    });
  });
}

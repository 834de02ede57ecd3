/**
 * One-shot exec: argv (no shell), as a guest user, bounded output, timeout that kills the whole
 * process group. Any command that ran is a result (non-zero exit included); only failing to start
 * is an error.
 */
import fs from 'node:fs';
import os from 'node:os';
import { invalid } from '../../../shared/errors.js';
import { MAX_EXEC_OUTPUT, type ExecRequest, type ExecResult } from '../../../shared/schemas/exec.js';
import { spawnClean } from '../spawn/clean-spawn.js';
import { baseEnv, guestUser, type UserInfo } from '../users.js';
import { ERRORS } from '../errors.js';

export interface ExecOptions {
  /** X display the commands see as DISPLAY (e.g. ":1"), if any. */
  display?: string;
  agentUserName?: string;
  /** Per-stream cap (default MAX_EXEC_OUTPUT). */
  maxOutput?: number;
  /**
   * After the started process exits, how long to keep reading from pipes that a background child
   * still holds open before answering (default 500 ms).
   */
  drainAfterExitMs?: number;
  resolveUser?: (u: 'agent' | 'root') => UserInfo;
}

class Capped {
  private chunks: Buffer[] = [];
  private size = 0;
  truncated = false;
  constructor(private readonly max: number) {}
  push(b: Buffer): void {
    // Keep reading past the cap (and discard) so the child never blocks on a full pipe.
    if (this.size >= this.max) {
      this.truncated = true;
      return;
    }
    const room = this.max - this.size;
    if (b.length > room) {
      this.chunks.push(b.subarray(0, room));
      this.size += room;
      this.truncated = true;
    } else {
      this.chunks.push(b);
      this.size += b.length;
    }
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/**
 * Whether `u` may search every directory down to `dir`. libuv changes directory BEFORE it drops to the
 * user, so without this check a command would start inside a directory its user cannot enter.
 */
export function canEnter(dir: string, u: UserInfo): boolean {
  if (u.uid === 0) return true;
  let real: string;
  try {
    real = fs.realpathSync(dir);
  } catch {
    return false;
  }
  const parts = real.split('/').filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    try {
      const st = fs.statSync('/' + parts.slice(0, i).join('/'));
      const bit = st.uid === u.uid ? (st.mode >> 6) & 1 : st.gid === u.gid ? (st.mode >> 3) & 1 : st.mode & 1;
      if (bit !== 1) return false;
    } catch {
      return false;
    }
  }
  return true;
}

export function runCommand(req: ExecRequest, opts: ExecOptions = {}): Promise<ExecResult> {
  const userOf = opts.resolveUser ?? ((u: 'agent' | 'root') => guestUser(u, opts.agentUserName ?? 'agent'));
  const u = userOf(req.user);
  const max = opts.maxOutput ?? MAX_EXEC_OUTPUT;
  const cwd = req.cwd ?? u.home;
  if (req.cwd !== undefined) {
    let st: fs.Stats | null = null;
    try {
      st = fs.statSync(req.cwd);
    } catch {
      /* reported below */
    }
    if (!st || !st.isDirectory()) throw invalid(`cwd ${req.cwd} is not an existing directory.`, [{ field: 'cwd', message: 'not an existing directory' }]);
    if (!canEnter(req.cwd, u)) throw invalid(`cwd ${req.cwd} cannot be entered by ${u.name}.`, [{ field: 'cwd', message: 'permission denied' }]);
  }
  const env = { ...baseEnv(u, opts.display), ...(req.env ?? {}) };
  const started = process.hrtime.bigint();

  return new Promise<ExecResult>((resolve, reject) => {
    const { child, started: programRuns } = spawnClean(req.command[0]!, req.command.slice(1), {
      // The home directory may be missing; '/' then, like login(1) does.
      cwd: req.cwd !== undefined || canEnter(cwd, u) ? cwd : '/',
      env,
      uid: u.uid,
      gid: u.gid,
      // Own process group, so a timeout can kill everything the command started.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const out = new Capped(max);
    const err = new Capped(max);
    let timedOut = false;
    let settled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let open = 2;
    let drainTimer: NodeJS.Timeout | undefined;
    // The answer waits for the helper's word that the program itself runs (see spawn/clean-spawn.ts).
    let running = false;

    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, req.timeout_ms);

    const finish = () => {
      if (settled || !exit || !running) return;
      settled = true;
      clearTimeout(timer);
      if (drainTimer) clearTimeout(drainTimer);
      child.stdout?.destroy();
      child.stderr?.destroy();
      const sig = exit.signal;
      const sigNum = sig ? (os.constants.signals as Record<string, number>)[sig] ?? 0 : 0;
      resolve({
        stdout: out.text(),
        stderr: err.text(),
        exit_code: exit.code ?? 128 + sigNum,
        signal: sig,
        timed_out: timedOut,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        duration_ms: Number(process.hrtime.bigint() - started) / 1e6,
      });
    };

    programRuns.then(() => {
      running = true;
      if (open === 0) finish();
    }, (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const code = e.code ?? 'EUNKNOWN';
      if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOEXEC' || code === 'ENOTDIR' || code === 'EISDIR') {
        const why = code === 'ENOENT' ? 'not found' : code === 'EACCES' ? 'permission denied' : 'not executable';
        reject(invalid(`Could not start ${req.command[0]}: ${why}.`, [{ field: 'command.0', message: why }]));
      } else {
        reject(ERRORS.commandNotStarted(e));
      }
    });
    // Failures arrive through `started`; the event must still have a listener.
    child.on('error', () => {});
    child.stdout!.on('data', (b: Buffer) => out.push(b));
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    const streamDone = () => {
      open--;
      if (open === 0) finish();
    };
    child.stdout!.on('close', streamDone);
    child.stderr!.on('close', streamDone);
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      if (open === 0) finish();
      // A background process that inherited stdout can hold the pipe open forever; stop waiting.
      else drainTimer = setTimeout(finish, opts.drainAfterExitMs ?? 500);
    });

    // The child may exit without reading its stdin; EPIPE then is not an error of the exec.
    child.stdin!.on('error', () => {});
    if (req.stdin !== undefined && req.stdin.length) child.stdin!.end(req.stdin);
    else child.stdin!.end();
  });
}

/**
 * Terminals. The ONE module that imports node-pty.
 *
 * Bytes are never decoded: node-pty runs with `encoding: null`, so output arrives as Buffers and
 * input is written as Buffers (utf8 mode corrupts binary and split multibyte sequences).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type * as NodePty from 'node-pty';
import { invalid } from '../../../shared/errors.js';
import { newId } from '../../../shared/ids.js';
import type { PtyOpen, Terminal } from '../../../shared/schemas/pty.js';
import { spawnHelper } from '../spawn/clean-spawn.js';
import { baseEnv, guestUser, type UserInfo } from '../users.js';
import { drainBeforeClose } from './drain.js';
import { ERRORS } from '../errors.js';

// node-pty is loaded on the first terminal, not at import: ~20 ms less of the agent's start, which
// is on the path from machine create to display up (node-pty is CommonJS, so a sync require works).
const requireCjs = createRequire(import.meta.url);
let nodePtyModule: typeof NodePty | null = null;
function nodePty(): typeof NodePty {
  nodePtyModule ??= requireCjs('node-pty') as typeof NodePty;
  return nodePtyModule;
}

export interface PtyManagerOptions {
  display?: string;
  agentUserName?: string;
  /** Output kept while no client is attached, replayed on the next attach (default 1 MiB). */
  replayBytes?: number;
  /** Open terminals at most (default 128). */
  maxTerminals?: number;
  resolveUser?: (u: 'agent' | 'root') => UserInfo;
  /**
   * setpriv(1) used to drop to a non-root user. node-pty's own uid/gid switch keeps the agent's
   * supplementary groups; setpriv clears them. null: use node-pty's switch (default: /usr/bin/setpriv
   * when present).
   */
  setprivPath?: string | null;
}

/** Where a terminal's output goes while a client is attached. */
export interface AttachSink {
  /** Returns false when the consumer wants the producer to wait for `drain`. */
  write(chunk: Buffer): boolean;
  onDrain(cb: () => void): void;
  /** The pty exited: end the stream, reporting the exit code. */
  end(exitCode: number, signal: number | null): void;
}

export interface AttachHandle {
  /** Bytes from the client into the pty, unmodified. */
  input(chunk: Buffer): void;
  /** The client went away; the pty keeps running and its output is buffered. */
  detach(): void;
}

export interface PtyManager {
  open(req: PtyOpen): Terminal;
  list(): Terminal[];
  get(id: string): Terminal;
  resize(id: string, cols: number, rows: number): Terminal;
  kill(id: string): void;
  attach(id: string, sink: AttachSink): AttachHandle;
  /** Kill every terminal (agent shutdown). */
  closeAll(): void;
}

interface Entry {
  info: Terminal;
  pty: NodePty.IPty;
  sink: AttachSink | null;
  /** Output produced while detached (bounded; oldest dropped first). */
  backlog: Buffer[];
  backlogBytes: number;
  paused: boolean;
  killTimer?: NodeJS.Timeout;
  /** The client asked for it to be killed: once it exits it is gone, unread output or not. */
  killed?: boolean;
  /** Set when the program exited before any client read its last output. */
  exited?: { code: number; signal: number | null; timer: NodeJS.Timeout };
}

/**
 * How long an exited terminal with unread output stays attachable. A short command (`id -u`) can exit
 * before the client's attach arrives; its output must not vanish with it.
 */
export const EXITED_TERMINAL_GRACE_MS = 60_000;

function findExecutable(cmd: string, pathVar: string): string | null {
  const candidates = cmd.includes('/') ? [cmd] : pathVar.split(':').filter(Boolean).map((d) => path.join(d, cmd));
  for (const c of candidates) {
    try {
      const st = fs.statSync(c);
      if (st.isFile() && (st.mode & 0o111) !== 0) return c;
    } catch {
      /* next */
    }
  }
  return null;
}

export function createPtyManager(opts: PtyManagerOptions = {}): PtyManager {
  const userOf = opts.resolveUser ?? ((u: 'agent' | 'root') => guestUser(u, opts.agentUserName ?? 'agent'));
  const replayBytes = opts.replayBytes ?? 1024 * 1024;
  const maxTerminals = opts.maxTerminals ?? 128;
  const setpriv = opts.setprivPath === undefined ? (fs.existsSync('/usr/bin/setpriv') ? '/usr/bin/setpriv' : null) : opts.setprivPath;
  const terms = new Map<string, Entry>();

  // A killed terminal stays in `terms` until its program exits (its output is drained first, so that can
  // take a moment), but for callers it is gone at once: a second kill, a resize or an attach is a 404.
  const entryOf = (id: string): Entry => {
    const e = terms.get(id);
    if (!e || e.killed) throw ERRORS.noTerminal(id);
    return e;
  };
  const view = (e: Entry): Terminal => ({ ...e.info, command: [...e.info.command], attached: e.sink !== null });

  function open(req: PtyOpen): Terminal {
    if (terms.size >= maxTerminals) throw ERRORS.tooManyTerminals(maxTerminals);
    const u = userOf(req.user);
    const command = req.command ?? [u.shell, '-l'];
    const env: Record<string, string> = { ...baseEnv(u, opts.display), TERM: 'xterm-256color', ...(req.env ?? {}) };
    const cwd = req.cwd ?? u.home;
    let st: fs.Stats | null = null;
    try {
      st = fs.statSync(cwd);
    } catch {
      /* below */
    }
    if (!st?.isDirectory()) {
      if (req.cwd !== undefined) throw invalid(`cwd ${req.cwd} is not an existing directory.`, [{ field: 'cwd', message: 'not an existing directory' }]);
    }
    // Fail a missing program here, as a 400, rather than as a terminal that dies at once.
    if (!findExecutable(command[0]!, env.PATH ?? '')) {
      throw invalid(`Could not start ${command[0]}: not found or not executable.`, [{ field: 'command.0', message: 'not found' }]);
    }
    const dropWithSetpriv = u.uid !== 0 && setpriv !== null;
    const argv = dropWithSetpriv ? [setpriv!, '--reuid', String(u.uid), '--regid', String(u.gid), '--clear-groups', '--', ...command] : command;
    let pty: NodePty.IPty;
    try {
      // Security gate: forkpty's child inherits every other terminal's master (node-pty opens them
      // without close-on-exec); computer-spawn closes all fds above 2 before the program runs.
      pty = nodePty().spawn(spawnHelper(), ['-', ...argv], {
        name: 'xterm-256color',
        cols: req.cols,
        rows: req.rows,
        cwd: st?.isDirectory() ? cwd : '/',
        env,
        encoding: null,
        ...(u.uid !== 0 && !dropWithSetpriv ? { uid: u.uid, gid: u.gid } : {}),
      });
    } catch (e) {
      throw invalid(`Could not start ${command[0]}.`, [{ field: 'command.0', message: 'could not start' }]);
    }
    const id = newId('terminal');
    const entry: Entry = {
      info: { id, command: [...command], user: req.user, cols: req.cols, rows: req.rows, created_at: new Date().toISOString(), attached: false },
      pty,
      sink: null,
      backlog: [],
      backlogBytes: 0,
      paused: false,
    };
    terms.set(id, entry);

    const onChunk = (chunk: Buffer) => {
      if (entry.sink) {
        if (!entry.sink.write(chunk) && !entry.paused) {
          // Backpressure: stop reading the pty until the client catches up (the program then blocks).
          entry.paused = true;
          pty.pause();
        }
        return;
      }
      entry.backlog.push(chunk);
      entry.backlogBytes += chunk.length;
      while (entry.backlogBytes > replayBytes && entry.backlog.length) {
        const over = entry.backlogBytes - replayBytes;
        const first = entry.backlog[0]!;
        if (first.length <= over) {
          entry.backlog.shift();
          entry.backlogBytes -= first.length;
        } else {
          entry.backlog[0] = first.subarray(over);
          entry.backlogBytes -= over;
        }
      }
    };
    pty.onData((d: string | Buffer) => onChunk(typeof d === 'string' ? Buffer.from(d, 'binary') : d));
    // The output a program wrote just before exiting is still in the kernel when node-pty closes
    // its stream; read it first (see drain.ts), so `exit` always comes after every byte.
    try {
      drainBeforeClose(pty, onChunk);
    } catch (e) {
      terms.delete(id);
      pty.kill('SIGKILL');
      throw e;
    }
    pty.onExit(({ exitCode, signal }) => {
      if (entry.killTimer) clearTimeout(entry.killTimer);
      const sink = entry.sink;
      if (!sink && entry.backlogBytes > 0 && !entry.killed) {
        const timer = setTimeout(() => {
          if (terms.get(id) === entry) terms.delete(id);
        }, EXITED_TERMINAL_GRACE_MS);
        timer.unref();
        entry.exited = { code: exitCode, signal: signal ?? null, timer };
        return;
      }
      terms.delete(id);
      entry.sink = null;
      sink?.end(exitCode, signal ?? null);
    });
    return view(entry);
  }

  function signalGroup(e: Entry, sig: NodeJS.Signals): void {
    try {
      // The pty's child is a session and process-group leader; signal everything in its group.
      process.kill(-e.pty.pid, sig);
    } catch {
      try {
        e.pty.kill(sig);
      } catch {
        /* gone */
      }
    }
  }

  function kill(id: string): void {
    const e = entryOf(id);
    if (e.exited) {
      clearTimeout(e.exited.timer);
      terms.delete(id);
      return;
    }
    e.killed = true;
    signalGroup(e, 'SIGHUP');
    if (!e.killTimer) {
      e.killTimer = setTimeout(() => signalGroup(e, 'SIGKILL'), 2000);
      e.killTimer.unref();
    }
  }

  function attach(id: string, sink: AttachSink): AttachHandle {
    const e = entryOf(id);
    // One client per terminal: the gateway maps this refusal to close code 4409.
    if (e.sink) throw ERRORS.terminalAttached(id);
    e.sink = sink;
    sink.onDrain(() => {
      if (e.sink === sink && e.paused) {
        e.paused = false;
        e.pty.resume();
      }
    });
    const backlog = e.backlog;
    e.backlog = [];
    e.backlogBytes = 0;
    let ok = true;
    for (const b of backlog) ok = sink.write(b) && ok;
    if (e.exited) {
      // The program is gone: hand over what it printed, then its exit status, and forget it.
      clearTimeout(e.exited.timer);
      terms.delete(id);
      e.sink = null;
      sink.end(e.exited.code, e.exited.signal);
      return { input() {}, detach() {} };
    }
    if (!ok && !e.paused) {
      e.paused = true;
      e.pty.pause();
    }
    let detached = false;
    return {
      input(chunk: Buffer) {
        if (detached || !terms.has(id)) return;
        e.pty.write(chunk);
      },
      detach() {
        if (detached) return;
        detached = true;
        if (e.sink === sink) {
          e.sink = null;
          if (e.paused) {
            e.paused = false;
            e.pty.resume();
          }
        }
      },
    };
  }

  return {
    open,
    list: () => [...terms.values()].filter((e) => !e.exited && !e.killed).map(view),
    get: (id) => view(entryOf(id)),
    resize(id, cols, rows) {
      const e = entryOf(id);
      if (e.exited) throw ERRORS.terminalExited(id);
      e.pty.resize(cols, rows);
      e.info.cols = cols;
      e.info.rows = rows;
      return view(e);
    },
    kill,
    attach,
    closeAll() {
      for (const e of terms.values()) {
        if (e.exited) clearTimeout(e.exited.timer);
        else signalGroup(e, 'SIGKILL');
      }
    },
  };
}

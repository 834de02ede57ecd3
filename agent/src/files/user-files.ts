/**
 * Files operations as the `agent` user, through the files worker (worker.ts). One worker, started on
 * first use and again after it exits; requests are multiplexed on its stdin/stdout by id.
 *
 * Security invariant: a files request that does not ask for root never runs with the agent's
 * credentials. The worker has the agent user's uid and gid and no supplementary groups, and holds no
 * fd of the agent's (computer-spawn closes them all), nor the token (its environment and argv carry
 * paths only).
 */
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppError } from '../../../shared/errors.js';
import type { z } from 'zod';
import { ListResult, WriteResult, type ReadQuery, type ReadResult, type WriteBody } from '../../../shared/schemas/files.js';
import type { DenySpec } from '../denylist/index.js';
import { spawnClean } from '../spawn/clean-spawn.js';
import type { UserInfo } from '../users.js';
import type { WorkerConfig } from './worker.js';
import { decodeWrite, encodeRange } from './service.js';
import { encodeFrame, FrameDecoder, RangeMeta, WorkerAnswer, type Frame } from './worker-protocol.js';

export interface FileOps {
  list(p: string): Promise<ListResult>;
  read(q: ReadQuery): Promise<ReadResult>;
  write(p: string, body: WriteBody): Promise<WriteResult>;
}

export interface UserFiles extends FileOps {
  /** Stop the worker (agent shutdown). */
  close(): void;
  /** The worker's pid while it runs (tests). */
  readonly pid: number | null;
}

export interface UserFilesOptions {
  deny: DenySpec;
  user: UserInfo;
  /** Identities of denied objects, captured by the agent as root (Denylist.identities()). */
  identities: () => { inodes: string[]; rdevs: number[] };
  agentPid?: number;
}

interface Pending {
  schema: { safeParse(v: unknown): { success: boolean; data?: unknown } };
  resolve(v: { value: unknown; payload: Buffer }): void;
  reject(e: unknown): void;
}

/**
 * The memory settings the image's init starts the agent with (docs/guest-image.md, "Memory"): V8's young
 * generation capped and glibc's arenas limited. The worker is a Node process like the agent
 * and gets the same ones, so they are set in one place, the init.
 */
const MEMORY_FLAG = /^--max-semi-space-size=\d+$/;
const MEMORY_ENV = ['MALLOC_ARENA_MAX'] as const;

function memorySettings(): { flags: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const k of MEMORY_ENV) {
    const v = process.env[k];
    if (v !== undefined && /^\d+$/.test(v)) env[k] = v;
  }
  return { flags: process.execArgv.filter((a) => MEMORY_FLAG.test(a)), env };
}

/** How to run worker.ts: compiled (the image, dist/) or from source under a TypeScript loader (tests). */
function workerCommand(): { args: string[]; env: NodeJS.ProcessEnv; cwd: string } {
  const self = fileURLToPath(import.meta.url);
  const dir = path.dirname(self);
  const mem = memorySettings();
  if (self.endsWith('.js')) return { args: [...mem.flags, path.join(dir, 'worker.js')], env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', ...mem.env }, cwd: '/' };
  // Source checkout: keep the parent's loader flags (not its coverage hooks, which write files as root).
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const loaders = process.execArgv.filter((a) => !a.includes('processinfo'));
  return { args: [...loaders, path.join(dir, 'worker.ts')], env, cwd: dir };
}

function workerStopped(): AppError {
  return new AppError('internal_error', 'The files worker stopped; retry the request.');
}

export function createUserFiles(opts: UserFilesOptions): UserFiles {
  let child: ChildProcess | null = null;
  let nextId = 1;
  const pending = new Map<number, Pending>();

  const failAll = (e: unknown) => {
    for (const p of pending.values()) p.reject(e);
    pending.clear();
  };

  function start(): ChildProcess {
    const cfg: WorkerConfig = { deny: opts.deny, agentPid: opts.agentPid ?? process.pid, identities: opts.identities(), user: opts.user };
    const cmd = workerCommand();
    const { child: c, started } = spawnClean(process.execPath, [...cmd.args, JSON.stringify(cfg)], {
      uid: opts.user.uid,
      gid: opts.user.gid,
      cwd: cmd.cwd,
      env: cmd.env,
      // stderr: the worker logs nothing itself; a crash trace (no request data) reaches the agent's log.
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const decoder = new FrameDecoder();
    const stop = (e: unknown) => {
      if (child === c) child = null;
      c.kill('SIGKILL');
      failAll(e);
    };
    started.catch(() => stop(workerStopped()));
    c.on('exit', () => stop(workerStopped()));
    c.stdin!.on('error', () => {});
    c.stdout!.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = decoder.push(chunk);
      } catch {
        return stop(new AppError('internal_error', 'The files worker answered out of protocol.'));
      }
      for (const f of frames) {
        // The worker runs as the agent user, who can tamper with it: its answers are parsed, not trusted.
        const a = WorkerAnswer.safeParse(f.header);
        if (!a.success) return stop(new AppError('internal_error', 'The files worker answered out of protocol.'));
        const p = pending.get(a.data.id);
        if (!p) continue;
        pending.delete(a.data.id);
        const ans = a.data;
        if (ans.ok) {
          const v = p.schema.safeParse(ans.value);
          if (!v.success) return stop(new AppError('internal_error', 'The files worker answered out of protocol.'));
          p.resolve({ value: v.data, payload: f.payload });
        }
        else if ('error' in ans) p.reject(new AppError(ans.error.code, ans.error.message, { details: ans.error.details }));
        else p.reject(Object.assign(new Error('files worker failure'), { code: ans.internal }));
      }
    });
    return c;
  }

  function call<T>(schema: z.ZodType<T>, req: Record<string, unknown>, payload?: Buffer): Promise<{ value: T; payload: Buffer }> {
    child ??= start();
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { schema, resolve: resolve as Pending['resolve'], reject });
      for (const part of encodeFrame({ ...req, id }, payload)) child!.stdin!.write(part);
    });
  }

  async function read(q: ReadQuery): Promise<ReadResult> {
    const r = await call(RangeMeta, { op: 'range', path: q.path, offset: q.offset, length: q.length });
    // Bounded by the range asked for: a worker that sends more is out of protocol.
    if (r.payload.length > q.length) throw new AppError('internal_error', 'The files worker answered out of protocol.');
    return encodeRange(q, { data: r.payload, size: r.value.size, eof: r.value.eof });
  }

  async function write(p: string, body: WriteBody): Promise<WriteResult> {
    const data = decodeWrite(body);
    const opts = { append: body.append, createDirs: body.createDirs, mode: body.mode, user: body.user };
    return (await call(WriteResult, { op: 'write', path: p, opts }, data)).value;
  }

  return {
    list: async (p) => (await call(ListResult, { op: 'list', path: p })).value,
    read,
    write,
    close() {
      child?.kill('SIGKILL');
      child = null;
      failAll(workerStopped());
    },
    get pid() {
      return child?.pid ?? null;
    },
  };
}

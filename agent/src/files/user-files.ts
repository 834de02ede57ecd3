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
import { buildWorkerBundle } from './worker-bundle.js';
import type { UserInfo } from '../users.js';
import type { WorkerConfig } from './worker.js';
import { decodeWrite, encodeRange } from './service.js';
import { encodeFrame, FrameDecoder, RangeMeta, WorkerAnswer, type Frame } from './worker-protocol.js';
import { ERRORS } from '../errors.js';

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

interface WorkerCommand {
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
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

/** The worker's environment: paths and the memory settings only (never the agent's, which may hold its token). */
function workerEnv(mem: { env: Record<string, string> }): NodeJS.ProcessEnv {
  return { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', ...mem.env };
}

let bundle: Promise<string> | null = null;

/**
 * How to run worker.ts: compiled (the image, dist/), or from a source checkout as one bundled file outside the
 * checkout (worker-bundle.ts), made once per process; a failed bundling is tried again by the next start.
 */
async function workerCommand(): Promise<WorkerCommand> {
  const self = fileURLToPath(import.meta.url);
  const dir = path.dirname(self);
  const mem = memorySettings();
  if (self.endsWith('.js')) return { args: [...mem.flags, path.join(dir, 'worker.js')], env: workerEnv(mem), cwd: '/' };
  bundle ??= buildWorkerBundle(path.join(dir, 'worker.ts'), path.resolve(dir, '../../..')).catch((e: unknown) => {
    bundle = null;
    throw e;
  });
  return { args: [...mem.flags, await bundle], env: workerEnv(mem), cwd: '/' };
}

function workerStopped(): AppError {
  return ERRORS.filesWorkerStopped();
}

export function createUserFiles(opts: UserFilesOptions): UserFiles {
  let child: ChildProcess | null = null;
  let nextId = 1;
  const pending = new Map<number, Pending>();

  const failAll = (e: unknown) => {
    for (const p of pending.values()) p.reject(e);
    pending.clear();
  };

  function start(cmd: WorkerCommand): ChildProcess {
    const cfg: WorkerConfig = { deny: opts.deny, agentPid: opts.agentPid ?? process.pid, identities: opts.identities(), user: opts.user };
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
        return stop(ERRORS.filesWorkerOutOfProtocol());
      }
      for (const f of frames) {
        // The worker runs as the agent user, who can tamper with it: its answers are parsed, not trusted.
        const a = WorkerAnswer.safeParse(f.header);
        if (!a.success) return stop(ERRORS.filesWorkerOutOfProtocol());
        const p = pending.get(a.data.id);
        if (!p) continue;
        pending.delete(a.data.id);
        const ans = a.data;
        if (ans.ok) {
          const v = p.schema.safeParse(ans.value);
          if (!v.success) return stop(ERRORS.filesWorkerOutOfProtocol());
          p.resolve({ value: v.data, payload: f.payload });
        }
        else if ('error' in ans) p.reject(ERRORS.workerRefused(ans.error));
        else p.reject(Object.assign(new Error('files worker failure'), { code: ans.internal }));
      }
    });
    return c;
  }

  async function call<T>(schema: z.ZodType<T>, req: Record<string, unknown>, payload?: Buffer): Promise<{ value: T; payload: Buffer }> {
    if (!child) {
      // Concurrent first calls await the same command and resume in order: one worker, requests in call order.
      const cmd = await workerCommand().catch(() => {
        throw workerStopped();
      });
      child ??= start(cmd);
    }
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { schema, resolve: resolve as Pending['resolve'], reject });
      for (const part of encodeFrame({ ...req, id }, payload)) child!.stdin!.write(part);
    });
  }

  async function read(q: ReadQuery): Promise<ReadResult> {
    const r = await call(RangeMeta, { op: 'range', path: q.path, offset: q.offset, length: q.length });
    // Bounded by the range asked for: a worker that sends more is out of protocol.
    if (r.payload.length > q.length) throw ERRORS.filesWorkerOutOfProtocol();
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

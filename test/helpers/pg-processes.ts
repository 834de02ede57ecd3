/**
 * Several real control-plane-like processes on one throwaway PostgreSQL (test/helpers/postgres.ts): each child
 * (pg-process-child.ts) runs one piece under test and reports what happens as JSON lines on stdout, which the
 * test waits on in order (never on a clock: `next` waits for the next matching line, however long load makes it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Test } from 'tap';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pg-process-child.ts');

export type ChildLine = Record<string, unknown> & { at: number };

export interface PgChild {
  proc: ChildProcess;
  name: string;
  /** Every line so far, in order. */
  lines: ChildLine[];
  /** The first line from index `from` on (default: the next unseen one) matching `pred`; waits for it. */
  next(pred: (l: ChildLine) => boolean, from?: number): Promise<ChildLine>;
  /** Sends one JSON command line to the child's stdin. */
  send(cmd: Record<string, unknown>): void;
  kill9(): Promise<void>;
  /** Asks the child to stop cleanly and waits for its exit. */
  stop(): Promise<void>;
}

/** Starts `script` (default: pg-process-child.ts) with `args` as its JSON argv[2], and `env` added to this process's environment. */
export function startChild(name: string, args: Record<string, unknown>, script = CHILD, env: Record<string, string> = {}): PgChild {
  const proc = spawn(process.execPath, ['--import=@tapjs/typescript/import', script, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const lines: ChildLine[] = [];
  const waiters: Array<() => void> = [];
  let cursor = 0;
  let exited = false;
  readline.createInterface({ input: proc.stdout! }).on('line', (text) => {
    if (!text.startsWith('{')) return;
    lines.push({ ...(JSON.parse(text) as Record<string, unknown>), at: Date.now() });
    for (const w of waiters.splice(0)) w();
  });
  const exit = new Promise<void>((resolve) =>
    proc.once('exit', () => {
      exited = true;
      for (const w of waiters.splice(0)) w();
      resolve();
    }),
  );
  const child: PgChild = {
    proc,
    name,
    lines,
    async next(pred, from) {
      for (let i = from ?? cursor; ; ) {
        for (; i < lines.length; i++) {
          if (pred(lines[i]!)) {
            cursor = i + 1;
            return lines[i]!;
          }
        }
        if (exited) throw new Error(`${name} exited before the line awaited (${JSON.stringify(lines)})`);
        await new Promise<void>((r) => waiters.push(r));
      }
    },
    send: (cmd) => proc.stdin!.write(JSON.stringify(cmd) + '\n'),
    async kill9() {
      if (!exited) proc.kill('SIGKILL');
      await exit;
    },
    async stop() {
      if (!exited) child.send({ op: 'exit' });
      await exit;
    },
  };
  return child;
}

/** A starter of children sharing `base` arguments, all killed when `t` ends. */
export function childGroup(t: Test, base: Record<string, unknown>, script = CHILD): (name: string, args: Record<string, unknown>, env?: Record<string, string>) => PgChild {
  const children: PgChild[] = [];
  t.teardown(async () => {
    for (const c of children) await c.kill9();
  });
  return (name, args, env) => {
    const c = startChild(name, { ...base, ...args }, script, env);
    children.push(c);
    return c;
  };
}

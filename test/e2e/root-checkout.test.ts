/**
 * Issue 21 ("Done means": the README's set-up commands with the checkout under /root): the agent's tests run code
 * of the checkout as the unprivileged `agent` user — the `computer-spawn` helper every agent process starts through,
 * and the files worker. This repository's HEAD cloned into a new 0700 directory (as /root is), then, as root from
 * that clone, `npx tap` on the two agent test files that exercise both: a files-as-agent-user test and the spawn
 * test. Before the fix the helper was built into the checkout's `libexec/` and the worker ran from its source, which
 * the agent user cannot reach there: both files failed (EACCES from the helper, 500s from the files routes).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { cloneHead, readmeEnv } from '../helpers/fresh-clone.js';

const FILES = ['test/agent/files-user.test.ts', 'test/agent/spawn-fds.test.ts'];

t.test("the agent's as-the-agent-user tests pass from a checkout under a 0700 directory", async (t) => {
  const { top, dir } = cloneHead();
  t.teardown(() => fs.rmSync(top, { recursive: true, force: true }));
  t.equal(fs.statSync(top).mode & 0o777, 0o700, 'the checkout is under a 0700 directory');

  const child = spawn('npx', ['tap', '--disable-coverage', ...FILES], { cwd: dir, env: readmeEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  t.equal(code, 0, `npx tap ${FILES.join(' ')} passed in the clone${code === 0 ? '' : `:\n${out.slice(-4000)}`}`);
  t.notOk(fs.existsSync(path.join(dir, 'libexec')), 'nothing was built into the checkout');
});

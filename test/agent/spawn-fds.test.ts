/**
 * Issue #10 item 2 at the agent level: with root terminals open (their pty masters live in the agent,
 * without close-on-exec), no process the agent starts may hold an fd beyond 0-2 (agent/src/spawn/).
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCommand } from '../../agent/src/exec/run.js';
import { createPtyManager } from '../../agent/src/pty/manager.js';
import { runClean, spawnClean } from '../../agent/src/spawn/clean-spawn.js';

const ptys = createPtyManager({});
t.teardown(() => ptys.closeAll());
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'spawn-fds-'));
fs.chmodSync(dir, 0o777);
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

async function fileOf(p: string): Promise<string> {
  for (let i = 0; i < 400; i++) {
    if (fs.existsSync(p)) return fs.readFileSync(p, 'utf8');
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${p} never appeared`);
}

t.before(() => {
  // Two root terminals: their masters are open in this process from now on.
  ptys.open({ user: 'root', cols: 80, rows: 24, command: ['sleep', '60'] });
  ptys.open({ user: 'root', cols: 80, rows: 24, command: ['sleep', '60'] });
  const mine = fs.readdirSync('/proc/self/fd').map((fd) => { try { return fs.readlinkSync(`/proc/self/fd/${fd}`); } catch { return ''; } });
  if (!mine.some((l) => /ptmx$/.test(l))) throw new Error('the test process should hold pty masters');
});

t.test('exec (agent and root) sees only fds 0-2', async (t) => {
  for (const user of ['agent', 'root'] as const) {
    // `; true`: the shell stays the spawned process; ls, its child, lists the shell's fds.
    const r = await runCommand({ command: ['sh', '-c', 'ls /proc/$$/fd; true'], user, timeout_ms: 10_000 });
    t.equal(r.stdout, '0\n1\n2\n', `exec as ${user}`);
  }
});

t.test('terminals (agent and root) see only fds 0-2', async (t) => {
  for (const user of ['agent', 'root'] as const) {
    const out = path.join(dir, `term-${user}`);
    ptys.open({ user, cols: 80, rows: 24, command: ['sh', '-c', `sh -c "ls /proc/\\$PPID/fd > ${out}.tmp && mv ${out}.tmp ${out}"; exec sleep 60`] });
    t.equal(await fileOf(out), '0\n1\n2\n', `terminal as ${user}`);
  }
});

t.test('agent-internal tools too (runClean, spawnClean)', async (t) => {
  const r = await runClean('sh', ['-c', 'ls /proc/$$/fd; true']);
  t.equal(r.stdout, '0\n1\n2\n');
  const c = spawnClean('definitely-not-a-program-xyz', [], { stdio: 'ignore' });
  await t.rejects(c.started, { code: 'ENOENT' }, 'a program that cannot start is reported with its errno');
});

t.test('only spawn/clean-spawn.ts starts processes (a new spawn elsewhere would bypass the helper)', async (t) => {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../agent/src');
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith('.ts') && !p.endsWith(path.join('spawn', 'clean-spawn.ts'))) {
        const src = fs.readFileSync(p, 'utf8');
        // Type-only imports are fine; a value import of child_process is a process start.
        if (/import\s+(?!type\b)[^;]*from\s+'node:child_process'/.test(src) || /require\(['"](node:)?child_process['"]\)/.test(src)) offenders.push(path.relative(root, p));
      }
    }
  };
  walk(root);
  t.same(offenders, []);
  const pty = fs.readFileSync(path.join(root, 'pty', 'manager.ts'), 'utf8');
  t.match(pty, /nodePty\(\)\.spawn\(spawnHelper\(\)/, 'terminals exec the helper first');
});

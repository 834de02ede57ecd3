import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { lookupUser } from '../../agent/src/users.js';
import { MAX_EXEC_OUTPUT } from '../../shared/schemas/exec.js';
import { agentPaths, startAgent, type TestAgent } from '../helpers/agent-files-exec.js';

const agentUser = lookupUser('agent')!;
let agent: TestAgent;
t.before(async () => {
  agent = await startAgent(agentPaths('exec-'), [execRoutes({ display: ':77' })]);
});
t.teardown(() => agent.close());

const exec = async (body: Record<string, unknown>) => {
  const r = await agent.client.request('POST', '/exec', body);
  return { status: r.status, body: r.json() };
};

const STDIN_MARK = 'stdin-marker-51b9';
const ARG_MARK = 'argv-marker-c4d0';

t.test('runs argv as the agent user, without a shell', async (t) => {
  const r = await exec({ command: ['sh', '-c', 'id -u; id -g; id -G; printf "%s|" "$HOME" "$USER" "$DISPLAY" "$1"', 'sh', `$(echo ${ARG_MARK})`] });
  t.equal(r.status, 200);
  const [uid, gid, groups, rest] = r.body.stdout.split('\n');
  t.equal(Number(uid), agentUser.uid);
  t.equal(Number(gid), agentUser.gid);
  t.equal(groups.trim(), String(agentUser.gid), 'no supplementary groups inherited from the agent');
  t.equal(rest, `${agentUser.home}|agent|:77|$(echo ${ARG_MARK})|`, 'argv is not shell-expanded');
  t.match(r.body, { exit_code: 0, signal: null, timed_out: false, stdout_truncated: false, stderr_truncated: false, stderr: '' });
  t.type(r.body.duration_ms, 'number');

  const root = await exec({ command: ['id', '-u'], user: 'root' });
  t.equal(root.body.stdout, '0\n');
});

t.test('exit codes, stderr, stdin, env, cwd', async (t) => {
  let r = await exec({ command: ['sh', '-c', 'echo oops >&2; exit 3'] });
  t.equal(r.status, 200, 'non-zero exit is still 200');
  t.equal(r.body.exit_code, 3);
  t.equal(r.body.stderr, 'oops\n');

  const input = `${STDIN_MARK}\nline two ✓\n`;
  r = await exec({ command: ['cat'], stdin: input });
  t.equal(r.body.stdout, input);

  process.env.AGENT_ONLY_VARIABLE = 'leak';
  r = await exec({ command: ['sh', '-c', 'printf "%s|%s" "$FOO" "${AGENT_ONLY_VARIABLE-unset}"'], env: { FOO: 'bar baz' } });
  t.equal(r.body.stdout, 'bar baz|unset', 'request env added, agent env not leaked');
  delete process.env.AGENT_ONLY_VARIABLE;

  r = await exec({ command: ['pwd'], cwd: '/tmp' });
  t.equal(r.body.stdout, '/tmp\n');
  r = await exec({ command: ['pwd'] });
  t.equal(r.body.stdout, `${agentUser.home}\n`, 'default cwd is the user home');

  r = await exec({ command: ['sh', '-c', 'kill -TERM $$'] });
  t.equal(r.status, 200);
  t.equal(r.body.signal, 'SIGTERM');
  t.equal(r.body.exit_code, 143);
});

t.test('failure to start is 400 with the field', async (t) => {
  let r = await exec({ command: ['/nonexistent/program-xyz'] });
  t.equal(r.status, 400);
  t.equal(r.body.error.code, 'invalid_request');
  t.equal(r.body.error.details[0].field, 'command.0');
  r = await exec({ command: ['no-such-program-xyz'] });
  t.equal(r.body.error.details[0].field, 'command.0');
  const dir = fs.mkdtempSync('/tmp/exec-noexec-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const notExec = path.join(dir, 'script');
  fs.writeFileSync(notExec, '#!/bin/sh\necho hi\n', { mode: 0o644 });
  fs.chmodSync(dir, 0o755);
  r = await exec({ command: [notExec] });
  t.equal(r.status, 400);
  t.equal(r.body.error.details[0].field, 'command.0');

  r = await exec({ command: ['pwd'], cwd: '/nonexistent-dir-xyz' });
  t.equal(r.status, 400);
  t.equal(r.body.error.details[0].field, 'cwd');
  const locked = path.join(dir, 'locked');
  fs.mkdirSync(locked, { mode: 0o700 });
  r = await exec({ command: ['pwd'], cwd: locked });
  t.equal(r.status, 400, 'a cwd the agent user cannot enter');
  t.equal(r.body.error.details[0].field, 'cwd');
  r = await exec({ command: ['pwd'], cwd: locked, user: 'root' });
  t.equal(r.status, 200, 'root can');

  for (const bad of [{ command: [] }, { command: [''] }, { command: ['a\u0000b'] }, { command: ['true'], timeout_ms: 0 }, { command: ['true'], user: 'nobody' }]) {
    r = await exec(bad);
    t.equal(r.status, 400, JSON.stringify(bad));
  }
});

t.test('timeout kills the whole process group', async (t) => {
  const r = await exec({ command: ['sh', '-c', 'sleep 60 & echo $!; wait'], timeout_ms: 300 });
  t.equal(r.status, 200);
  t.equal(r.body.timed_out, true);
  t.equal(r.body.signal, 'SIGKILL');
  t.equal(r.body.exit_code, 137);
  const bg = Number(r.body.stdout.trim());
  t.ok(bg > 0, 'background child pid reported');
  // The background sleep was in the group: it is gone (or a zombie awaiting its reaper).
  let state = 'gone';
  for (let i = 0; i < 50; i++) {
    try {
      state = fs.readFileSync(`/proc/${bg}/stat`, 'utf8').split(') ')[1]!.split(' ')[0]!;
    } catch {
      state = 'gone';
    }
    if (state === 'gone' || state === 'Z') break;
    await new Promise((res) => setTimeout(res, 20));
  }
  t.ok(state === 'gone' || state === 'Z', `background child killed (state ${state})`);
});

t.test('output is bounded, flagged, and the child never blocks', async (t) => {
  const r = await exec({ command: ['sh', '-c', `head -c ${MAX_EXEC_OUTPUT * 3} /dev/zero | tr '\\0' x; head -c 10 /dev/zero | tr '\\0' y >&2`] });
  t.equal(r.status, 200);
  t.equal(r.body.exit_code, 0, 'the writer finished (was never blocked)');
  t.equal(r.body.stdout.length, MAX_EXEC_OUTPUT);
  t.equal(r.body.stdout_truncated, true);
  t.equal(r.body.stderr, 'yyyyyyyyyy');
  t.equal(r.body.stderr_truncated, false);
});

t.test('a background child holding stdout does not hold the answer', async (t) => {
  const r = await exec({ command: ['sh', '-c', 'sleep 30 & echo $!; echo done'] });
  t.equal(r.status, 200);
  const [pid, done] = r.body.stdout.split('\n');
  t.equal(done, 'done');
  t.equal(r.body.timed_out, false);
  try {
    process.kill(Number(pid), 'SIGKILL');
  } catch {
    /* gone */
  }
});

t.test('logs never carry commands, argv or stdin', async (t) => {
  await new Promise((r) => setTimeout(r, 20));
  const log = agent.logText();
  for (const s of [STDIN_MARK, ARG_MARK, 'oops', 'sleep', 'head -c', 'bar baz', 'no-such-program-xyz']) t.notOk(log.includes(s), `log never shows ${s}`);
  t.ok(agent.lines.some((l) => l.event === 'request' && l.route === '/exec' && l.status === 200));
});

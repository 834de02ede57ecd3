/**
 * Issue #10 item 4 at the agent level: files routes act as the `agent` user unless they ask for root,
 * and the guest kernel decides (the files worker runs with the agent user's credentials); memory and
 * environment views of processes are denied for everyone, root included, as a clear 403.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { createFileService } from '../../agent/src/files/service.js';
import { createUserFiles } from '../../agent/src/files/user-files.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { lookupUser } from '../../agent/src/users.js';
import { agentPaths, startAgent, q, type TestAgent } from '../helpers/agent-files-exec.js';

const agentUser = lookupUser('agent')!;
let agent: TestAgent;
let userFiles: ReturnType<typeof createUserFiles>;
let work: string;

t.before(async () => {
  const p = agentPaths('files-user-');
  // The test's own directory is 0700 root (it holds the token); the agent user works next to it.
  work = fs.mkdtempSync('/tmp/files-user-work-');
  fs.chmodSync(work, 0o755);
  fs.writeFileSync(path.join(work, 'root-only'), 'root secret\n', { mode: 0o600 });
  fs.writeFileSync(path.join(work, 'public'), 'hello\n', { mode: 0o644 });
  fs.mkdirSync(path.join(work, 'mine'));
  fs.chownSync(path.join(work, 'mine'), agentUser.uid, agentUser.gid);
  const deny = { enrollFile: p.enrollFile, channelPaths: [p.sock] };
  const svc = createFileService({ deny });
  userFiles = createUserFiles({ deny, user: agentUser, identities: () => svc.denylist.identities() });
  agent = await startAgent(p, [filesRoutes({ root: svc, agent: userFiles })]);
});
t.teardown(async () => {
  userFiles.close();
  await agent.close();
  fs.rmSync(work, { recursive: true, force: true });
});

const read = (p: string, user?: string) => agent.client.request('GET', `/files/content?path=${q(p)}${user ? `&user=${user}` : ''}`);

t.test('reads run as the agent user by default; root only when asked', async (t) => {
  const byDefault = await read(path.join(work, 'root-only'));
  t.equal(byDefault.status, 403, 'a root-only file is refused to the default user');
  t.equal(byDefault.json().error.code, 'permission_denied');
  t.notMatch(byDefault.body.toString(), /root secret/);
  const asRoot = await read(path.join(work, 'root-only'), 'root');
  t.equal(asRoot.status, 200);
  t.equal(asRoot.json().content, 'root secret\n', 'root reads it when asked');
  t.equal((await read(path.join(work, 'public'))).json().content, 'hello\n', 'the agent user reads what it may');

  const shadow = await read('/etc/shadow');
  t.equal(shadow.status, 403, '/etc/shadow is refused to the agent user');
  t.equal(shadow.json().error.code, 'permission_denied');

  const listRoot = await agent.client.request('GET', `/files?path=${q('/root')}`);
  t.equal(listRoot.status, 403, "root's home cannot be listed by the agent user");
  t.equal(listRoot.json().error.code, 'permission_denied');
});

t.test('writes run as the agent user: the kernel decides, the file belongs to the user', async (t) => {
  const denied = await agent.client.request('PUT', `/files/content?path=${q(path.join(work, 'new-by-agent'))}`, { content: 'x' });
  t.equal(denied.status, 403, 'a root-owned directory is not writable by the agent user');
  t.notOk(fs.existsSync(path.join(work, 'new-by-agent')));
  const target = path.join(work, 'mine', 'sub', 'f.txt');
  const ok = await agent.client.request('PUT', `/files/content?path=${q(target)}`, { content: 'mine' });
  t.equal(ok.status, 200);
  t.equal(fs.statSync(target).uid, agentUser.uid, 'the new file belongs to the agent user');
  t.equal(fs.statSync(path.dirname(target)).uid, agentUser.uid, 'so does the directory it created');
  const asRoot = await agent.client.request('PUT', `/files/content?path=${q(path.join(work, 'by-root'))}`, { content: 'r', user: 'root' });
  t.equal(asRoot.status, 200, 'root writes where it asks to');
  t.equal(fs.statSync(path.join(work, 'by-root')).uid, 0, 'and the file is root-owned');
});

t.test('bytes round-trip through the worker: a 20 MB write, a 4 MB range, UTF-8 checks', async (t) => {
  const target = path.join(work, 'mine', 'big.bin');
  const data = Buffer.alloc(20 * 1024 * 1024);
  for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
  const w = await agent.client.request('PUT', `/files/content?path=${q(target)}`, { content: data.toString('base64'), encoding: 'base64' });
  t.equal(w.status, 200);
  t.same(w.json(), { path: target, size: data.length, written: data.length });
  t.ok(fs.readFileSync(target).equals(data), 'the file holds exactly the bytes sent');
  const r = await agent.client.request('GET', `/files/content?path=${q(target)}&offset=1000&length=4194304&encoding=base64`);
  t.equal(r.status, 200);
  t.match(r.json(), { offset: 1000, length: 4194304, size: data.length, eof: false });
  t.ok(Buffer.from(r.json().content, 'base64').equals(data.subarray(1000, 1000 + 4194304)), 'the range is exactly those bytes');
  fs.writeFileSync(path.join(work, 'mine', 'bad.txt'), Buffer.from([0xff, 0xfe]));
  const bad = await agent.client.request('GET', `/files/content?path=${q(path.join(work, 'mine', 'bad.txt'))}`);
  t.equal(bad.status, 400, 'a utf8 read of non-UTF-8 bytes is still a 400');
});

t.test('process memory and environment views are denied to every user, as a clear 403', async (t) => {
  for (const f of ['mem', 'environ', 'pagemap', 'maps', 'smaps', 'auxv', 'stack', 'syscall', 'mountinfo', 'task/1/mem']) {
    for (const user of ['agent', 'root']) {
      const r = await read(`/proc/1/${f}`, user);
      t.equal(r.status, 403, `/proc/1/${f} as ${user}`);
      t.equal(r.json().error.code, 'permission_denied');
    }
  }
  const status = await read('/proc/1/status', 'root');
  t.equal(status.status, 200, 'other /proc files stay readable');
});

t.test('the worker has the agent user credentials and no supplementary groups; it comes back after it dies', async (t) => {
  const pid = userFiles.pid!;
  const st = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  t.match(st, new RegExp(`\\nUid:\\t${agentUser.uid}\\t${agentUser.uid}\\t${agentUser.uid}\\t${agentUser.uid}\\n`));
  t.match(st, /\nGroups:\t *\n/, 'no supplementary groups');
  process.kill(pid, 'SIGKILL');
  // Requests in flight when the worker dies answer 500; the next one after its exit starts a new worker.
  for (let i = 0; i < 400 && userFiles.pid !== null; i++) await new Promise((r) => setTimeout(r, 10));
  const again = await read(path.join(work, 'public'));
  t.equal(again.status, 200, 'the next request starts a new worker');
  t.not(userFiles.pid, pid);
});

import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { createPtyManager } from '../../agent/src/pty/manager.js';
import { terminalsRoutes } from '../../agent/src/routes/terminals.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { createFileService } from '../../agent/src/files/service.js';
import { lookupUser } from '../../agent/src/users.js';
import { agentPaths, startAgent, q, TOKEN, type TestAgent } from '../helpers/agent-files-exec.js';
import { openAttach } from '../helpers/agent-pty-stream.js';

const agentUser = lookupUser('agent')!;
const mgr = createPtyManager();
let agent: TestAgent;
let work: string;
t.before(async () => {
  const p = agentPaths('pty-');
  work = path.join(p.dir, 'work');
  fs.mkdirSync(work);
  fs.chmodSync(p.dir, 0o755);
  fs.chmodSync(work, 0o777);
  const files = createFileService({ deny: { enrollFile: p.enrollFile, channelPaths: [p.sock] } });
  // One root FileService for both users: this file tests file semantics, not the user switch (files-user.test.ts).
  agent = await startAgent(p, [terminalsRoutes(mgr), execRoutes(), filesRoutes({ root: files, agent: files })]);
});
t.teardown(async () => {
  mgr.closeAll();
  await agent.close();
});

const TYPED_MARK = 'typed-marker-93ad';
const open = async (body: Record<string, unknown>) => agent.client.request('POST', '/terminals', body);
const waitUntil = async (pred: () => boolean | Promise<boolean>, what: string) => {
  for (let i = 0; i < 500; i++) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('gave up waiting for ' + what);
};
const listed = async () => (await agent.client.request('GET', '/terminals')).json().terminals as Array<{ id: string; attached: boolean }>;

t.test('open a login shell, list, type into it over the attach stream', async (t) => {
  const r = await open({});
  t.equal(r.status, 200);
  const term = r.json();
  t.match(term.id, /^term_[0-9a-z]{20,32}$/);
  t.same(term.command, [agentUser.shell, '-l'], 'default is the login shell with -l');
  t.match(term, { user: 'agent', cols: 80, rows: 24, attached: false });
  t.ok((await listed()).some((x) => x.id === term.id));

  const s = openAttach(agent.client, TOKEN, term.id);
  const h = await s.response;
  t.equal(h[':status'], 200, 'attach answers over the real HTTP/2 channel');
  t.match(h['x-request-id'], /^req_/);
  t.ok((await listed()).find((x) => x.id === term.id)!.attached, 'listed as attached');

  s.write(`echo "${TYPED_MARK}-$((6*7))"; id -u; id -G; shopt -q login_shell && echo LOG""IN\n`);
  const out = (await s.waitFor((b) => b.includes('LOGIN\r\n'))).toString();
  t.match(out, `${TYPED_MARK}-42`);
  t.match(out, new RegExp(`\\r\\n${agentUser.uid}\\r\\n${agentUser.gid}\\r\\n`), 'runs as agent without supplementary groups');

  s.write('exit 5\n');
  const { trailers } = await s.ended;
  t.equal(trailers?.['x-pty-exit-code'], '5', 'exit code arrives as a trailer');
  await waitUntil(async () => !(await listed()).some((x) => x.id === term.id), 'terminal to leave the list');
  t.pass('an exited terminal leaves the list');
  const again = await agent.client.request('POST', `/terminals/${term.id}/attach`, Buffer.alloc(0));
  t.equal(again.status, 404);
});

t.test('bytes are exact both ways', async (t) => {
  const inFile = path.join(work, 'in.bin');
  const outFile = path.join(work, 'out.bin');
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  fs.writeFileSync(outFile, all);
  const term = (
    await open({
      command: ['sh', '-c', `stty raw -echo -iexten; echo READY; head -c 512 > ${inFile}; printf 'BEGIN>'; cat ${outFile}; printf '<END'; read x`],
    })
  ).json();
  const s = openAttach(agent.client, TOKEN, term.id);
  await s.waitFor((b) => b.includes('READY'));
  // Every byte value, twice, including ^C, ^D, ^Z, ESC, DEL and invalid UTF-8.
  s.write(Buffer.concat([all, all]));
  const out = await s.waitFor((b) => b.includes('<END'));
  t.ok(fs.readFileSync(inFile).equals(Buffer.concat([all, all])), 'input reached the program unmodified');
  const start = out.indexOf('BEGIN>') + 'BEGIN>'.length;
  t.ok(out.subarray(start, out.lastIndexOf('<END')).equals(all), 'output reached the client unmodified');
  s.write('\n');
  const { trailers } = await s.ended;
  t.equal(trailers?.['x-pty-exit-code'], '0');
});

t.test('one client at a time; detach keeps the pty and replays what it missed', async (t) => {
  const go = path.join(work, 'go');
  const printed = path.join(work, 'printed');
  const script = `read a; echo "got-$a"; while [ ! -e ${go} ]; do sleep 0.02; done; echo missed-while-detached; touch ${printed}; read b; echo "then-$b"; exit 3`;
  const term = (await open({ command: ['sh', '-c', script] })).json();
  const first = openAttach(agent.client, TOKEN, term.id);
  await first.response;
  const second = await agent.client.request('POST', `/terminals/${term.id}/attach`, Buffer.alloc(0));
  t.equal(second.status, 409, 'a second attach is refused');
  t.equal(second.json().error.code, 'conflict');

  first.write('one\n');
  await first.waitFor((b) => b.includes('got-one'));
  first.close();
  await first.ended;
  await waitUntil(async () => (await listed()).find((x) => x.id === term.id)?.attached === false, 'detach');
  t.pass('detached, still listed');
  fs.writeFileSync(go, '');
  await waitUntil(() => fs.existsSync(printed), 'output while detached');

  const third = openAttach(agent.client, TOKEN, term.id);
  t.equal((await third.response)[':status'], 200, 'attach again after detach');
  await third.waitFor((b) => b.includes('missed-while-detached'));
  t.pass('output produced while detached is replayed');
  t.notOk(third.output().includes('got-one'), 'output already delivered is not replayed');
  third.write('two\n');
  await third.waitFor((b) => b.includes('then-two'));
  const { trailers } = await third.ended;
  t.equal(trailers?.['x-pty-exit-code'], '3');
});

t.test('resize and kill', async (t) => {
  const term = (await open({ command: ['sh'], cols: 100, rows: 30, cwd: work, env: { PS1: '$ ' } })).json();
  t.match(term, { cols: 100, rows: 30 });
  const s = openAttach(agent.client, TOKEN, term.id);
  s.write('stty size; pwd\n');
  await s.waitFor((b) => b.includes(work));
  t.match(s.output().toString(), '30 100');
  const r = await agent.client.request('POST', `/terminals/${term.id}/resize`, { cols: 120, rows: 40 });
  t.equal(r.status, 200);
  t.match(r.json(), { id: term.id, cols: 120, rows: 40, attached: true });
  s.write('stty size\n');
  await s.waitFor((b) => b.includes('40 120'));
  t.pass('the program sees the new size');
  t.equal((await agent.client.request('POST', `/terminals/${term.id}/resize`, { cols: 0, rows: 40 })).status, 400);
  t.equal((await agent.client.request('POST', `/terminals/term_nope/resize`, { cols: 10, rows: 10 })).status, 404);

  const k = await agent.client.request('DELETE', `/terminals/${term.id}`);
  t.equal(k.status, 204);
  const { trailers } = await s.ended;
  t.ok(trailers?.['x-pty-exit-code'] !== undefined, 'the attached stream ends when the pty is killed');
  await waitUntil(async () => !(await listed()).some((x) => x.id === term.id), 'killed terminal to leave the list');
  t.equal((await agent.client.request('DELETE', `/terminals/${term.id}`)).status, 404);
});

t.test('a killed terminal is gone for callers at once, even while its program is still exiting', async (t) => {
  // The program ignores SIGHUP, so it outlives the kill by the 2 s grace before SIGKILL.
  const term = (await open({ command: ['sh', '-c', 'trap "" HUP; sleep 30'] })).json();
  t.equal((await agent.client.request('DELETE', `/terminals/${term.id}`)).status, 204);
  t.equal((await agent.client.request('DELETE', `/terminals/${term.id}`)).status, 404, 'a second kill is a 404');
  t.equal((await agent.client.request('POST', `/terminals/${term.id}/resize`, { cols: 10, rows: 10 })).status, 404, 'so is a resize');
  t.notOk((await listed()).some((x) => x.id === term.id), 'and it is not listed');
});

t.test('open refusals', async (t) => {
  let r = await open({ command: ['no-such-program-xyz'] });
  t.equal(r.status, 400);
  t.equal(r.json().error.details[0].field, 'command.0');
  r = await open({ cwd: '/nonexistent-xyz' });
  t.equal(r.json().error.details[0].field, 'cwd');
  r = await open({ cols: 5000 });
  t.equal(r.json().error.details[0].field, 'cols');
  r = await open({ user: 'nobody' });
  t.equal(r.status, 400);
  const root = (await open({ command: ['id', '-u'], user: 'root' })).json();
  const s = openAttach(agent.client, TOKEN, root.id);
  await s.ended.catch(() => {});
  t.match(s.output().toString(), /^0\r\n$/m, 'root terminal when asked');
});

t.test('a program that exits before the first attach keeps its output for that attach', async (t) => {
  const term = (await open({ command: ['sh', '-c', 'echo gone-before-attach; exit 7'] })).json();
  // Wait until it has exited: it leaves the list but stays attachable while its output is unread.
  for (let i = 0; i < 50; i++) {
    const l = (await agent.client.request('GET', '/terminals')).json().terminals as Array<{ id: string }>;
    if (!l.some((x) => x.id === term.id)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const listed = (await agent.client.request('GET', '/terminals')).json().terminals as Array<{ id: string }>;
  t.notOk(listed.some((x) => x.id === term.id), 'an exited terminal is not listed');
  t.equal((await agent.client.request('POST', `/terminals/${term.id}/resize`, { cols: 10, rows: 10 })).status, 409);
  const s = openAttach(agent.client, TOKEN, term.id);
  t.equal(Number((await s.response)[':status']), 200);
  const { trailers } = await s.ended;
  t.match(s.output().toString(), /gone-before-attach/);
  t.equal(trailers?.['x-pty-exit-code'], '7', 'the exit status arrives after the output');
  const again = openAttach(agent.client, TOKEN, term.id);
  t.equal(Number((await again.response)[':status']), 404, 'once read, it is gone');
  await again.ended.catch(() => {});
});

// `seq 1 20000` through a pty: 20000 lines, each followed by CR LF (the pty's onlcr). Pinned literally.
const SEQ_OUTPUT = Buffer.from(Array.from({ length: 20000 }, (_, i) => `${i + 1}\r\n`).join(''));
const SEQ_BYTES = 128_894;
const TAIL_RUNS = 100;
const TAIL_BATCH = 10;
/** TAIL_RUNS runs of `one`, TAIL_BATCH at a time: how many were exact with exit 0, and the sizes of the others. */
const inBatches = async (one: () => Promise<{ exact: boolean; bytes: number; code: unknown }>) => {
  let exact = 0;
  const sizes = new Set<number>();
  for (let i = 0; i < TAIL_RUNS; i += TAIL_BATCH) {
    for (const r of await Promise.all(Array.from({ length: TAIL_BATCH }, one))) {
      if (r.exact && r.code === '0') exact++;
      else sizes.add(r.bytes);
    }
  }
  return { exact, sizes };
};

t.test('every byte a program wrote arrives before its exit (attached, 100 runs)', async (t) => {
  t.equal(SEQ_OUTPUT.length, SEQ_BYTES);
  // The program waits for the client to be attached, so the output goes live over the channel rather
  // than through the replay; -echo keeps the newline that starts it out of the output.
  const script = 'stty -echo; echo READY; read go; seq 1 20000';
  const expected = Buffer.concat([Buffer.from('READY\r\n'), SEQ_OUTPUT]);
  const one = async () => {
    const term = (await open({ command: ['sh', '-c', script] })).json();
    const s = openAttach(agent.client, TOKEN, term.id);
    await s.waitFor((b) => b.includes('READY\r\n'));
    s.write('\n');
    const { trailers } = await s.ended;
    return { exact: s.output().equals(expected), bytes: s.output().length, code: trailers?.['x-pty-exit-code'] };
  };
  const { exact, sizes } = await inBatches(one);
  t.equal(exact, TAIL_RUNS, `byte-exact with exit 0 in every run (short runs got ${[...sizes].join(', ')} bytes)`);
});

t.test('every byte a program wrote is in the replay of a late attach (100 runs)', async (t) => {
  const one = async () => {
    const term = (await open({ command: ['seq', '1', '20000'] })).json();
    await waitUntil(async () => !(await listed()).some((x) => x.id === term.id), 'seq to exit');
    const s = openAttach(agent.client, TOKEN, term.id);
    const { trailers } = await s.ended;
    return { exact: s.output().equals(SEQ_OUTPUT), bytes: s.output().length, code: trailers?.['x-pty-exit-code'] };
  };
  const { exact, sizes } = await inBatches(one);
  t.equal(exact, TAIL_RUNS, `byte-exact replay with exit 0 in every run (short runs got ${[...sizes].join(', ')} bytes)`);
});

t.test('HTTP/2 concurrency: 100 requests while a pty stream is attached and streaming', async (t) => {
  const term = (await open({ command: ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.01; done'] })).json();
  const s = openAttach(agent.client, TOKEN, term.id);
  await s.waitFor((b) => b.includes('tick 3'));
  const f = path.join(work, 'concurrent.txt');
  fs.writeFileSync(f, 'concurrent content');
  const before = s.output().length;
  const jobs = Array.from({ length: 100 }, (_, i) =>
    i % 2
      ? agent.client.request('POST', '/exec', { command: ['echo', `n${i}`] }).then((r) => r.status === 200 && r.json().stdout === `n${i}\n`)
      : agent.client.request('GET', `/files/content?path=${q(f)}`).then((r) => r.status === 200 && r.json().content === 'concurrent content'),
  );
  const results = await Promise.all(jobs);
  t.equal(results.filter(Boolean).length, 100, 'all 100 answered correctly on the same connection');
  const n = s.output().length;
  await s.waitFor((b) => b.length > n);
  t.ok(s.output().length > before, 'the pty stream kept flowing');
  const k = await agent.client.request('DELETE', `/terminals/${term.id}`);
  t.equal(k.status, 204);
  await s.ended;
});

t.test('logs never carry typed text, commands or paths', async (t) => {
  await new Promise((r) => setTimeout(r, 20));
  const log = agent.logText();
  for (const s of [TYPED_MARK, 'stty', 'no-such-program-xyz', work, 'tick']) t.notOk(log.includes(s), `log never shows ${s}`);
  t.ok(agent.lines.some((l) => l.event === 'request' && l.route === '/terminals/:term_id/attach' && l.status === 200));
});

import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { createDenyPolicy, lexicalNormalize, lexicalPrefixes } from '../../agent/src/denylist/index.js';
import { createFileService } from '../../agent/src/files/service.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { isAppError } from '../../shared/errors.js';
import { agentPaths, startAgent, q, TOKEN } from '../helpers/agent-files-exec.js';

t.test('lexical normalization', async (t) => {
  t.equal(lexicalNormalize('/a//b/./c/'), '/a/b/c');
  t.equal(lexicalNormalize('/a/b/../../..'), '/');
  t.equal(lexicalNormalize('/../etc'), '/etc');
  t.same(lexicalPrefixes('/a/b/../c').prefixes, ['/a', '/a/b', '/a/c']);
});

t.test('pure decision', async (t) => {
  const pol = createDenyPolicy({
    paths: ['/etc/computer/token', '/run/agent//', '/var/lib/agent-config'],
    agentPid: 4242,
    isAgentTask: (tid) => tid === 4243,
  });
  const deny = [
    '/etc/computer/token',
    '/etc//computer/./token',
    '/etc/computer/x/../token',
    '/etc/computer/token/anything',
    '/etc/computer/token/../other', // passes through the denied entry
    '/run/agent',
    '/run/agent/agent.sock',
    '/var/lib/agent-config/conf.json',
    '/tmp/../var/lib/agent-config',
    '/dev/virtio-ports/computer.agent',
    '/dev/vport0p1',
    '/dev/vsock',
    '/dev/vhost-vsock',
    '/sys/firmware/qemu_fw_cfg/by_name/opt/computer/token/raw',
    '/proc/self',
    '/proc/self/environ',
    '/proc/thread-self/mem',
    '/proc/4242',
    '/proc/4242/mem',
    '/proc/4242/task/4243/environ',
    '/proc/4243/mem',
    '/proc/kcore',
    '/dev/mem',
    '/dev/kmem',
    '/dev/port',
  ];
  for (const p of deny) t.ok(pol.deniedBy(p), `denies ${p}`);
  const allow = ['/', '/etc', '/etc/computer', '/etc/computer/token2', '/etc/computer/tokens/x', '/run', '/run/agent2', '/proc', '/proc/1/status', '/proc/42420', '/dev', '/dev/null', '/dev/vsockx', '/sys/firmware', '/proc/cpuinfo', '/home/agent/x'];
  for (const p of allow) t.equal(pol.deniedBy(p), null, `allows ${p}`);
  t.throws(() => createDenyPolicy({ paths: ['/a/..'], agentPid: 1 }), 'an entry that is / is a wiring bug');
  t.throws(() => createDenyPolicy({ paths: ['relative'], agentPid: 1 }));
});

function setup() {
  const p = agentPaths('deny-');
  const d = p.dir;
  // conf/ is the agent's config dir and holds a second credential; chan/ stands for the channel dir.
  fs.mkdirSync(path.join(d, 'conf'));
  fs.writeFileSync(path.join(d, 'conf', 'key'), 'CONF-SECRET-' + 'k'.repeat(20));
  fs.mkdirSync(path.join(d, 'pub', 'sub'), { recursive: true });
  fs.writeFileSync(path.join(d, 'pub', 'file.txt'), 'public content');
  fs.writeFileSync(path.join(d, 'pub', 'sub', 'deep.txt'), 'deep content');
  // A credential file the wiring denies (as the agent's secrets store is): its identity is captured at start.
  const credential = path.join(d, 'credential');
  fs.writeFileSync(credential, TOKEN, { mode: 0o600 });
  const svc = createFileService({ deny: { enrollFile: p.enrollFile, channelPaths: [p.sock], configDir: path.join(d, 'conf'), extraPaths: [credential] } });
  return { ...p, d, svc, credential };
}

async function outcome(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'ok';
  } catch (e) {
    if (isAppError(e)) return e.code;
    throw e;
  }
}

t.test('walker: symlink hops, chains, .., hard links, bind mounts, devices, /proc', async (t) => {
  const { d, svc, enrollFile, credential } = setup();
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }));
  const read = (p: string) => svc.read({ path: p, offset: 0, length: 4096, encoding: 'utf8', user: 'root' });
  const pub = path.join(d, 'pub');

  t.equal((await read(path.join(pub, 'file.txt'))).content, 'public content');
  t.equal(await outcome(() => read(enrollFile)), 'permission_denied', 'the token file itself');
  t.equal(await outcome(() => read(path.join(d, 'conf', 'key'))), 'permission_denied', 'under the config dir');

  fs.symlinkSync(enrollFile, path.join(pub, 'tok-abs'));
  fs.symlinkSync('../enroll', path.join(pub, 'tok-rel'));
  fs.symlinkSync('tok-rel', path.join(pub, 'chain1'));
  fs.symlinkSync('chain1', path.join(pub, 'chain2'));
  fs.symlinkSync('../conf', path.join(pub, 'confdir'));
  fs.symlinkSync(path.join(pub, 'sub'), path.join(pub, 'sublink'));
  fs.symlinkSync('loop2', path.join(pub, 'loop1'));
  fs.symlinkSync('loop1', path.join(pub, 'loop2'));
  for (const name of ['tok-abs', 'tok-rel', 'chain2']) {
    t.equal(await outcome(() => read(path.join(pub, name))), 'permission_denied', `symlink ${name} to the token`);
  }
  t.equal(await outcome(() => read(path.join(pub, 'confdir', 'key'))), 'permission_denied', 'through a symlinked denied dir');
  t.equal(await outcome(() => read(pub + '/confdir/../pub/file.txt')), 'permission_denied', 'a hop into a denied dir, even when .. leaves it');
  // `..` after a symlink is taken from the link's target, like the kernel does.
  const viaDotDot = pub + '/sublink/../file.txt';
  t.equal((await read(viaDotDot)).content, fs.readFileSync(viaDotDot, 'utf8'), '.. after a symlink matches the kernel');
  t.equal((await read(path.join(pub, 'sublink', 'deep.txt'))).content, 'deep content');
  t.equal(await outcome(() => read(path.join(pub, 'loop1'))), 'invalid_request', 'symlink loop is ELOOP-style 400');

  fs.linkSync(credential, path.join(pub, 'hardlink'));
  t.equal(await outcome(() => read(path.join(pub, 'hardlink'))), 'permission_denied', 'hard link of a denied file (identity)');
  t.equal(await outcome(() => svc.write(path.join(pub, 'hardlink'), { content: 'x', encoding: 'utf8', append: true, createDirs: true, user: 'agent' })), 'permission_denied', 'append through a hard link');
  t.equal(await outcome(() => svc.write(path.join(pub, 'tok-abs'), { content: 'x', encoding: 'utf8', append: false, createDirs: true, user: 'agent' })), 'permission_denied', 'write through a symlink');
  t.equal(await outcome(() => svc.write(path.join(pub, 'confdir', 'new'), { content: 'x', encoding: 'utf8', append: false, createDirs: true, user: 'agent' })), 'permission_denied', 'create inside a denied dir');
  t.equal(await outcome(() => svc.list(path.join(pub, 'confdir'))), 'permission_denied', 'list a denied dir');
  t.equal(fs.readFileSync(credential, 'utf8'), TOKEN, 'credential untouched');
  // The enrollment secret is denied by path only: it is consumed at once, and the inode it frees is reused.
  fs.rmSync(enrollFile);
  fs.writeFileSync(path.join(pub, 'next-file'), 'an ordinary file');
  t.equal((await read(path.join(pub, 'next-file'))).content, 'an ordinary file', 'a file made after the secret is gone is readable');

  const mnt = path.join(pub, 'mnt');
  fs.mkdirSync(mnt);
  let bound = false;
  try {
    execFileSync('mount', ['--bind', path.join(d, 'conf'), mnt]);
    bound = true;
  } catch {
    /* no mount privilege here */
  }
  if (bound) {
    t.teardown(() => execFileSync('umount', [mnt]));
    t.equal(await outcome(() => read(path.join(mnt, 'key'))), 'permission_denied', 'bind mount of the config dir (identity)');
  } else t.skip('bind mount not permitted', async () => {});

  let made = false;
  try {
    execFileSync('mknod', [path.join(pub, 'memcopy'), 'c', '1', '1']);
    made = true;
  } catch {
    /* no mknod here */
  }
  if (made) {
    const r = await outcome(() => read(path.join(pub, 'memcopy')));
    t.equal(r, 'permission_denied', 'a mknod copy of /dev/mem (device identity)');
  } else t.skip('mknod not permitted', async () => {});

  // Another process's root magic link reads as "/": resolved as text, it leads back to the token.
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  t.teardown(() => child.kill('SIGKILL'));
  const tasks = fs.readdirSync('/proc/self/task').filter((x) => x !== String(process.pid));
  for (const p of [
    '/proc/self/environ',
    '/proc/self/cmdline',
    `/proc/${process.pid}/mem`,
    '/proc/thread-self/comm',
    `/proc/self/root${enrollFile}`,
    `/proc/${child.pid}/root${enrollFile}`,
    `/proc/${child.pid}/cwd/../../..${enrollFile}`,
    `/proc/${process.pid}/task/${tasks[0]}/environ`,
    `/proc/${tasks[0]}/environ`,
    '/proc/kcore',
    '/dev/mem',
  ]) {
    t.equal(await outcome(() => read(p)), 'permission_denied', `denied: ${p}`);
  }
  t.equal(await outcome(() => svc.list('/proc/self/fd')), 'permission_denied');
  // Other processes' /proc entries are ordinary files.
  t.equal(await outcome(() => read('/proc/1/status')), 'ok');
  t.equal(await outcome(() => svc.list('/proc')), 'ok');
});

t.test('swap race: a component flips between a real dir and a symlink to the denied dir', async (t) => {
  const { d, svc } = setup();
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }));
  const race = path.join(d, 'race');
  fs.mkdirSync(race);
  // realStore/key: harmless; linkStore -> the denied config dir whose `key` holds a credential.
  fs.mkdirSync(path.join(race, 'realStore'));
  fs.writeFileSync(path.join(race, 'realStore', 'key'), 'harmless');
  fs.symlinkSync(path.join(d, 'conf'), path.join(race, 'linkStore'));
  // Leaf race: `leaf` flips between a harmless file and a symlink to the token.
  fs.writeFileSync(path.join(race, 'leafFile'), 'harmless');
  fs.symlinkSync(path.join(d, 'credential'), path.join(race, 'leafLink'));
  const flipper = spawn(
    process.execPath,
    [
      '-e',
      `const fs=require('fs');const r=process.argv[1];const m=(a,b)=>{try{fs.renameSync(r+'/'+a,r+'/'+b)}catch{}};
       for(;;){m('realStore','a');m('leafFile','leaf');m('a','realStore');m('leaf','leafFile');
                m('linkStore','a');m('leafLink','leaf');m('a','linkStore');m('leaf','leafLink');}`,
      race,
    ],
    { stdio: 'ignore' },
  );
  t.teardown(() => {
    flipper.kill('SIGKILL');
  });

  const counts: Record<string, number> = {};
  const secrets = ['CONF-SECRET', TOKEN];
  let leaked = 0;
  for (let i = 0; i < 6000; i++) {
    const p = i % 2 ? path.join(race, 'a', 'key') : path.join(race, 'leaf');
    try {
      const r = await svc.read({ path: p, offset: 0, length: 4096, encoding: 'utf8', user: 'root' });
      if (secrets.some((s) => r.content.includes(s))) leaked++;
      counts[r.content === 'harmless' ? 'harmless' : 'other'] = (counts[r.content === 'harmless' ? 'harmless' : 'other'] ?? 0) + 1;
    } catch (e) {
      if (!isAppError(e)) throw e;
      counts[e.code] = (counts[e.code] ?? 0) + 1;
    }
  }
  flipper.kill('SIGKILL');
  t.equal(leaked, 0, 'no read ever returned denied content');
  t.equal(counts.other ?? 0, 0, 'every successful read returned the harmless content');
  // Both sides of the race were exercised: some reads saw the real dir, some saw the symlink.
  t.ok((counts.harmless ?? 0) > 0, `some reads saw the real dir (${JSON.stringify(counts)})`);
  t.ok((counts.permission_denied ?? 0) > 0, 'some reads saw the symlink and were refused');
});

t.test('denylist over the real channel: 403 envelope, and nothing logged', async (t) => {
  const p = agentPaths('deny-h2-');
  fs.mkdirSync(path.join(p.dir, 'pub'));
  fs.symlinkSync(p.enrollFile, path.join(p.dir, 'pub', 'innocent-name'));
  const svc = createFileService({ deny: { enrollFile: p.enrollFile, channelPaths: [p.sock, p.dir + '/chan'] } });
  // One root FileService for both users: this file tests file semantics, not the user switch (files-user.test.ts).
  const agent = await startAgent(p, [filesRoutes({ root: svc, agent: svc })]);
  t.teardown(() => agent.close());
  // Enrollment consumed the secret; a next one (the host's, for a restarted agent) is as unreachable.
  t.notOk(fs.existsSync(p.enrollFile), 'the enrollment consumed the secret');
  fs.writeFileSync(p.enrollFile, TOKEN, { mode: 0o600 });
  for (const target of [p.enrollFile, path.join(p.dir, 'pub', 'innocent-name'), p.sock, '/proc/self/environ']) {
    const r = await agent.client.request('GET', `/files/content?path=${q(target)}`);
    t.equal(r.status, 403, target);
    t.equal(r.json().error.code, 'permission_denied');
    t.notOk(r.body.toString().includes(TOKEN));
  }
  const w = await agent.client.request('PUT', `/files/content?path=${q(p.enrollFile)}`, { content: 'overwritten' });
  t.equal(w.status, 403);
  t.equal(fs.readFileSync(p.enrollFile, 'utf8'), TOKEN);
  await new Promise((r) => setTimeout(r, 20));
  const log = agent.logText();
  for (const s of [p.dir, 'innocent-name', 'environ', TOKEN, 'overwritten']) t.notOk(log.includes(s), `log never shows ${s}`);
  t.ok(agent.lines.some((l) => l.event === 'request' && l.route === '/files/content' && l.status === 403));
});

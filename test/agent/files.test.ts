import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createFileService } from '../../agent/src/files/service.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { lookupUser } from '../../agent/src/users.js';
import { MAX_READ_RANGE } from '../../shared/schemas/files.js';
import { agentPaths, startAgent, q, type TestAgent } from '../helpers/agent-files-exec.js';

const agentUser = lookupUser('agent')!;

let agent: TestAgent;
let root: string;
const CONTENT_MARK = 'file-body-marker-7c1e';

t.before(async () => {
  const p = agentPaths('files-');
  root = path.join(p.dir, 'work');
  fs.mkdirSync(root);
  const svc = createFileService({ deny: { enrollFile: p.enrollFile, channelPaths: [p.sock] } });
  // One root FileService for both users: this file tests file semantics, not the user switch (files-user.test.ts).
  agent = await startAgent(p, [filesRoutes({ root: svc, agent: svc })]);
});
t.teardown(() => agent.close());

const get = (p: string, extra = '') => agent.client.request('GET', `/files/content?path=${q(p)}${extra}`);
const put = (p: string, body: Record<string, unknown>) => agent.client.request('PUT', `/files/content?path=${q(p)}`, body);
const list = (p: string) => agent.client.request('GET', `/files?path=${q(p)}`);

t.test('list a directory', async (t) => {
  const d = path.join(root, 'listing');
  fs.mkdirSync(path.join(d, 'subdir'), { recursive: true });
  fs.writeFileSync(path.join(d, 'a.txt'), 'hello');
  fs.chmodSync(path.join(d, 'a.txt'), 0o640);
  fs.symlinkSync('a.txt', path.join(d, 'link'));
  execFileSync('mkfifo', [path.join(d, 'fifo')]);
  const r = await list(d);
  t.equal(r.status, 200);
  const body = r.json();
  t.equal(body.path, d);
  const by = Object.fromEntries(body.entries.map((e: any) => [e.name, e]));
  t.same(Object.keys(by).sort(), ['a.txt', 'fifo', 'link', 'subdir']);
  t.match(by['a.txt'], { type: 'file', size: 5, mode: '0640', path: path.join(d, 'a.txt') });
  t.equal(by['a.txt'].modified_at, fs.statSync(path.join(d, 'a.txt')).mtime.toISOString());
  t.equal(by.subdir.type, 'directory');
  t.match(by.link, { type: 'symlink', size: 5 });
  t.equal(by.fifo.type, 'other');

  t.equal((await list(path.join(d, 'a.txt'))).status, 400, 'listing a file');
  t.equal((await list(path.join(d, 'missing'))).json().error.code, 'not_found');
  t.equal((await list('relative/path')).status, 400);
  const rep = await agent.client.request('GET', `/files?path=${q(d)}&path=${q(d)}`);
  t.equal(rep.status, 400, 'repeated query parameter');
});

t.test('read whole, ranges, eof, encodings', async (t) => {
  const f = path.join(root, 'ten.txt');
  fs.writeFileSync(f, '0123456789');
  let r = (await get(f)).json();
  t.match(r, { content: '0123456789', offset: 0, length: 10, size: 10, eof: true, encoding: 'utf8' });
  r = (await get(f, '&offset=2&length=3')).json();
  t.match(r, { content: '234', offset: 2, length: 3, eof: false });
  r = (await get(f, '&offset=5&length=5')).json();
  t.match(r, { content: '56789', length: 5, eof: true }, 'a range ending exactly at the end is eof');
  r = (await get(f, '&offset=50')).json();
  t.match(r, { content: '', length: 0, eof: true });

  // /proc files report size 0; eof must still be right.
  const version = fs.readFileSync('/proc/version', 'utf8');
  r = (await get('/proc/version')).json();
  t.match(r, { content: version, size: 0, eof: true });
  r = (await get('/proc/version', '&length=5')).json();
  t.match(r, { content: version.slice(0, 5), eof: false });

  const bin = path.join(root, 'bin.dat');
  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  fs.writeFileSync(bin, bytes);
  r = (await get(bin, '&encoding=base64')).json();
  t.ok(Buffer.from(r.content, 'base64').equals(bytes), 'base64 is byte-exact');
  const bad = await get(bin);
  t.equal(bad.status, 400);
  t.equal(bad.json().error.code, 'invalid_request');
  t.match(bad.json().error.message, /base64/);

  const uni = path.join(root, 'uni.txt');
  fs.writeFileSync(uni, 'Spaß 日本語 ✓');
  t.equal((await get(uni)).json().content, 'Spaß 日本語 ✓');

  t.equal((await get(f, `&length=${MAX_READ_RANGE + 1}`)).status, 400, 'range over 4 MB');
  t.equal((await get(f, '&length=abc')).status, 400);
  t.equal((await get(f, '&encoding=latin1')).status, 400);
  t.equal((await get(root)).status, 400, 'reading a directory');
  t.equal((await get(path.join(root, 'nope'))).status, 404);
  t.equal((await get(path.join(f, 'child'))).status, 400, 'a file used as a directory');
  execFileSync('mkfifo', [path.join(root, 'pipe')]);
  t.equal((await get(path.join(root, 'pipe'))).status, 400, 'a FIFO is refused, not opened');

  // A 4 MB range of a larger file.
  const big = path.join(root, 'big.bin');
  const data = Buffer.alloc(MAX_READ_RANGE + 100, 7);
  data[MAX_READ_RANGE - 1] = 9;
  fs.writeFileSync(big, data);
  r = (await get(big, '&encoding=base64')).json();
  t.equal(r.length, MAX_READ_RANGE);
  t.equal(r.eof, false);
  t.ok(Buffer.from(r.content, 'base64').equals(data.subarray(0, MAX_READ_RANGE)));
  r = (await get(big, `&encoding=base64&offset=${MAX_READ_RANGE}`)).json();
  t.match(r, { length: 100, eof: true });
});

t.test('write: atomic replace, ownership, mode, createDirs, append, base64', async (t) => {
  const f = path.join(root, 'new', 'deeper', 'w.txt');
  let r = await put(f, { content: `${CONTENT_MARK} one` });
  t.equal(r.status, 200);
  t.same(r.json(), { path: f, size: CONTENT_MARK.length + 4, written: CONTENT_MARK.length + 4 });
  t.equal(fs.readFileSync(f, 'utf8'), `${CONTENT_MARK} one`);
  let st = fs.statSync(f);
  t.equal(st.uid, agentUser.uid, 'created file owned by agent');
  t.equal(st.mode & 0o7777, 0o644);
  for (const dir of [path.join(root, 'new'), path.join(root, 'new', 'deeper')]) {
    const ds = fs.statSync(dir);
    t.equal(ds.uid, agentUser.uid, 'created dirs owned by agent');
    t.equal(ds.mode & 0o7777, 0o755);
  }
  t.same(fs.readdirSync(path.dirname(f)), ['w.txt'], 'no temp file left behind');

  r = await put(f, { content: 'two', append: true });
  t.same(r.json(), { path: f, size: CONTENT_MARK.length + 7, written: 3 });
  t.equal(fs.readFileSync(f, 'utf8'), `${CONTENT_MARK} onetwo`);

  fs.chmodSync(f, 0o600);
  r = await put(f, { content: 'replaced' });
  st = fs.statSync(f);
  t.equal(fs.readFileSync(f, 'utf8'), 'replaced');
  t.equal(st.mode & 0o7777, 0o600, 'a replaced file keeps its mode');
  t.equal(st.uid, agentUser.uid, 'and its owner');

  const rootFile = path.join(root, 'rootfile');
  r = await put(rootFile, { content: 'x', user: 'root', mode: '0751' });
  st = fs.statSync(rootFile);
  t.equal(st.uid, 0);
  t.equal(st.mode & 0o7777, 0o751, 'mode applied (not masked by umask)');
  r = await put(rootFile, { content: 'y', mode: '600' });
  t.equal(fs.statSync(rootFile).mode & 0o7777, 0o600, 'mode on replace');

  const appended = path.join(root, 'appended-new');
  r = await put(appended, { content: 'abc', append: true, mode: '0640' });
  t.equal(r.status, 200);
  t.equal(fs.statSync(appended).mode & 0o7777, 0o640);
  t.equal(fs.statSync(appended).uid, agentUser.uid);

  const binFile = path.join(root, 'upload.bin');
  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => 255 - i));
  r = await put(binFile, { content: bytes.toString('base64'), encoding: 'base64' });
  t.ok(fs.readFileSync(binFile).equals(bytes), 'base64 write is byte-exact');
  r = await put(binFile, { content: 'not base64 !!', encoding: 'base64' });
  t.equal(r.status, 400);
  t.equal(r.json().error.details[0].field, 'content');

  r = await put(path.join(root, 'absent-dir', 'f'), { content: 'x', createDirs: false });
  t.equal(r.status, 404, 'missing parent without createDirs');
  t.equal(r.json().error.code, 'not_found');
  r = await put(root, { content: 'x' });
  t.equal(r.status, 400, 'writing onto a directory');
  r = await put(path.join(rootFile, 'under-a-file'), { content: 'x' });
  t.equal(r.status, 400, 'a file used as a directory');
  r = await put(f, { content: 'x', mode: '999' });
  t.equal(r.status, 400);
  t.equal(r.json().error.details[0].field, 'mode');
  r = await put(f, { content: 'x', bogus: 1 });
  t.equal(r.status, 400, 'unknown fields refused');
});

t.test('non-append writes are atomic: concurrent readers see old or new, never a mix', async (t) => {
  const f = path.join(root, 'atomic.txt');
  const A = 'A'.repeat(2 * 1024 * 1024);
  const B = 'B'.repeat(2 * 1024 * 1024);
  fs.writeFileSync(f, A);
  let mixed = 0;
  let reads = 0;
  let writing = true;
  const reader = (async () => {
    while (writing) {
      const buf = fs.readFileSync(f, 'latin1');
      reads++;
      if (!(buf === A || buf === B)) mixed++;
      await new Promise((r) => setImmediate(r));
    }
  })();
  for (let i = 0; i < 6; i++) {
    const r = await put(f, { content: i % 2 ? A : B });
    t.equal(r.status, 200);
  }
  writing = false;
  await reader;
  t.ok(reads > 0);
  t.equal(mixed, 0, `no torn read in ${reads} reads`);
});

t.test('logs never carry paths or contents', async (t) => {
  await new Promise((r) => setTimeout(r, 20));
  const log = agent.logText();
  for (const s of [root, 'w.txt', CONTENT_MARK, 'replaced', 'upload.bin', '/proc/version']) t.notOk(log.includes(s), `log never shows ${s}`);
  t.ok(agent.lines.filter((l) => l.event === 'request').length > 20);
  t.ok(agent.lines.every((l) => l.event !== 'request' || ['/auth/enroll', '/files', '/files/content'].includes(l.route as string)));
});

/**
 * A host's identity (control-plane/src/cluster/host-id.ts): created once in DATA_DIR/host-id (0600, one id and a
 * newline), read back at every start, the same for processes that race to create it, and a damaged file refused.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { HOST_ID_FILE, readOrCreateHostId } from '../../../control-plane/src/cluster/host-id.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../helpers/host-id-child.ts');

function dataDir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-id-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('created once, 0600, and the same id at every later start', async (t) => {
  const dir = dataDir(t);
  const id = readOrCreateHostId(dir);
  t.match(id, /^host_[0-9a-z]{24}$/);
  const file = path.join(dir, HOST_ID_FILE);
  t.equal(fs.readFileSync(file, 'utf8'), `${id}\n`);
  t.equal(fs.statSync(file).mode & 0o777, 0o600);
  t.equal(readOrCreateHostId(dir), id, 'read back');
  t.equal(readOrCreateHostId(dir), id, 'and again');
  t.same(fs.readdirSync(dir), [HOST_ID_FILE], 'no temporary file left behind');
});

t.test('an id written by an earlier release of the file is kept as it is', async (t) => {
  const dir = dataDir(t);
  fs.writeFileSync(path.join(dir, HOST_ID_FILE), 'host_0123456789abcdefghijklmn\n', { mode: 0o600 });
  t.equal(readOrCreateHostId(dir), 'host_0123456789abcdefghijklmn');
});

t.test('a damaged file is refused, never replaced', async (t) => {
  for (const text of ['', 'host_short\n', 'mch_0123456789abcdefghijklmn\n', 'host_0123456789abcdefghijklmn', 'host_0123456789abcdefghijklmn\nhost_x\n']) {
    const dir = dataDir(t);
    const file = path.join(dir, HOST_ID_FILE);
    fs.writeFileSync(file, text);
    t.throws(() => readOrCreateHostId(dir), {
      name: 'HostIdUnreadable',
      message: `${file} does not hold a host id (host_ and 20-32 of [0-9a-z]): restore it from a backup, never delete it while the host has machines`,
    }, JSON.stringify(text));
    t.equal(fs.readFileSync(file, 'utf8'), text, 'left as it was');
  }
});

t.test('processes starting together on an empty DATA_DIR all get one id', async (t) => {
  const dir = dataDir(t);
  const racers = Array.from({ length: 4 }, () => {
    const proc = spawn(process.execPath, ['--import=@tapjs/typescript/import', CHILD, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
    t.teardown(() => void proc.kill('SIGKILL'));
    const lines = readline.createInterface({ input: proc.stdout });
    const iter = lines[Symbol.asyncIterator]();
    const next = async () => String((await iter.next()).value);
    return { proc, next };
  });
  for (const r of racers) t.equal(await r.next(), 'ready');
  for (const r of racers) r.proc.stdin.write('go\n');
  const ids = await Promise.all(racers.map((r) => r.next()));
  t.match(ids[0], /^host_[0-9a-z]{24}$/);
  t.same(ids, [ids[0], ids[0], ids[0], ids[0]], 'every process read the one id');
  t.equal(fs.readFileSync(path.join(dir, HOST_ID_FILE), 'utf8'), `${ids[0]}\n`);
  t.same(fs.readdirSync(dir), [HOST_ID_FILE], 'the losers removed their candidates');
});

/**
 * Issue 21: where a development checkout keeps what the `agent` user runs (agent/src/spawn/dev-libexec.ts): root's
 * host-wide content-addressed directory, the modes that let that user run but not replace, a directory not ours
 * refused, and which source the spawn helper comes from (checkout: built; image: prebuilt).
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { contentKey, devLibexecBase, installArtifact } from '../../agent/src/spawn/dev-libexec.js';
import { helperSource } from '../../agent/src/spawn/clean-spawn.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dev-libexec-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

t.test('where, and under which key', async (t) => {
  t.equal(devLibexecBase(0, '/root/computer'), '/var/lib/computer/libexec', "root's: outside the checkout");
  t.equal(devLibexecBase(1000, '/home/me/computer'), '/home/me/computer/libexec', "another user's: the checkout's own");
  // sha256 of "14:computer-spawn12:int main(){}", first 16 hex digits.
  t.equal(contentKey(['computer-spawn', 'int main(){}']), '7146058220024ab2');
  t.not(contentKey(['computer-spawn', 'int main(){} ']), '7146058220024ab2', 'another content, another key');
  t.not(contentKey(['ab', 'c']), contentKey(['a', 'bc']), 'parts are length-prefixed');
});

t.test('installed once, 0755 directories, the given file mode, no temporary left', async (t) => {
  const base = path.join(tmp, 'a', 'libexec');
  let writes = 0;
  const a = { base, key: 'k1', name: 'files-worker.mjs', mode: 0o644, write: (p: string) => { writes++; fs.writeFileSync(p, 'x'); } };
  const out = installArtifact(a);
  t.equal(out, path.join(base, 'k1', 'files-worker.mjs'));
  t.equal(installArtifact(a), out, 'the same path again');
  t.equal(writes, 1, 'made once');
  t.equal(fs.statSync(out).mode & 0o7777, 0o644);
  t.equal(fs.statSync(base).mode & 0o7777, 0o755);
  t.equal(fs.statSync(path.join(base, 'k1')).mode & 0o7777, 0o755);
  t.equal(fs.statSync(path.dirname(base)).mode & 0o7777, 0o711, 'above the base: pass, never list');
  t.same(fs.readdirSync(path.join(base, 'k1')), ['files-worker.mjs']);
});

t.test('a failed build leaves nothing, and throws', async (t) => {
  const base = path.join(tmp, 'b');
  t.throws(() => installArtifact({ base, key: 'k', name: 'computer-spawn', mode: 0o755, write: (p) => { fs.writeFileSync(p, 'half'); throw new Error('cc failed'); } }), { message: 'cc failed' });
  t.same(fs.readdirSync(path.join(base, 'k')), []);
});

t.test('a base that is not our own directory is refused, nothing written', async (t) => {
  const elsewhere = path.join(tmp, 'elsewhere');
  fs.mkdirSync(elsewhere);
  const base = path.join(tmp, 'link');
  fs.symlinkSync(elsewhere, base);
  t.throws(() => installArtifact({ base, key: 'k', name: 'x', mode: 0o755, write: (p) => fs.writeFileSync(p, 'x') }), {
    message: `${base} is not a directory owned by uid ${process.getuid!()}; remove it`,
  });
  t.same(fs.readdirSync(elsewhere), []);
});

t.test('the spawn helper: a checkout builds it from its source, the image has it prebuilt', async (t) => {
  const has = (...paths: string[]) => (p: string) => paths.includes(p);
  t.same(helperSource('/root/computer', has('/root/computer/agent/native/computer-spawn.c', '/root/computer/libexec/computer-spawn')), {
    kind: 'build', checkout: '/root/computer', source: '/root/computer/agent/native/computer-spawn.c',
  }, 'a stale binary in the checkout is not used');
  t.same(helperSource('/opt/computer', has('/opt/computer/libexec/computer-spawn')), { kind: 'prebuilt', bin: '/opt/computer/libexec/computer-spawn' });
  t.equal(helperSource('/opt/computer/dist', has('/opt/computer/libexec/computer-spawn')), null);
});

/**
 * Writing a machine's identity into a guest root seen from the host (substrate/identity.ts): the root may come
 * from a tenant's template or fork, so links in it are replaced, never followed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { newIdentity, writeGuestIdentity } from '../../control-plane/src/substrate/identity.js';

const identity = { machineId: '0123456789abcdef0123456789abcdef', hostname: 'computer-0123456789ab' };

t.test('files written; a symlink at a target is replaced, not followed', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-identity-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const root = path.join(dir, 'root');
  const outside = path.join(dir, 'outside');
  fs.mkdirSync(path.join(root, 'etc'), { recursive: true });
  fs.writeFileSync(outside, 'host file\n');
  fs.symlinkSync(outside, path.join(root, 'etc', 'machine-id'));
  fs.symlinkSync(outside, path.join(root, 'etc', '.hosts.computer-new'));
  fs.mkdirSync(path.join(root, 'etc', 'hostname'));
  writeGuestIdentity(root, identity, null);
  t.equal(fs.readFileSync(outside, 'utf8'), 'host file\n', 'the link target is untouched');
  t.ok(fs.lstatSync(path.join(root, 'etc', 'machine-id')).isFile(), 'a regular file now');
  t.equal(fs.readFileSync(path.join(root, 'etc', 'machine-id'), 'utf8'), '0123456789abcdef0123456789abcdef\n');
  t.equal(fs.readFileSync(path.join(root, 'etc', 'hostname'), 'utf8'), 'computer-0123456789ab\n', 'a directory in the way is replaced');
  t.equal(fs.readFileSync(path.join(root, 'etc', 'hosts'), 'utf8'), '127.0.0.1\tlocalhost\n127.0.1.1\tcomputer-0123456789ab computer\n::1\tlocalhost ip6-localhost ip6-loopback\n');
  t.equal(fs.statSync(path.join(root, 'etc', 'machine-id')).mode & 0o777, 0o644);
  t.same(fs.readdirSync(path.join(root, 'etc')).sort(), ['hostname', 'hosts', 'machine-id'], 'nothing left beside them');
});

t.test('an etc that is a link is refused, and nothing is written through it', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pool-identity-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const root = path.join(dir, 'root');
  fs.mkdirSync(path.join(dir, 'elsewhere'));
  fs.mkdirSync(root);
  fs.symlinkSync(path.join(dir, 'elsewhere'), path.join(root, 'etc'));
  t.throws(() => writeGuestIdentity(root, identity, null), { code: 'conflict', message: "the machine's disk has no /etc directory to hold its identity" });
  t.same(fs.readdirSync(path.join(dir, 'elsewhere')), []);
});

t.test('a fresh identity: 32 random lowercase hex, and the hostname computer- and its first 12', async (t) => {
  const a = newIdentity();
  const b = newIdentity();
  t.match(a.machineId, /^[0-9a-f]{32}$/);
  t.equal(a.hostname, `computer-${a.machineId.slice(0, 12)}`);
  t.not(a.machineId, b.machineId);
});

/**
 * The image's computer-identity (images/rootfs/usr/sbin/computer-identity), which a VM's init runs at every boot
 * on /proc/cmdline: run here, as the guest runs it, on a command line file and a root directory of the test's.
 * The command line is the host's but parsed as input: exactly one `computer.machine_id=<32 lowercase hex>` and
 * one `computer.hostname=computer-<12 lowercase hex>`, or nothing is written and the image's `computer` is kept;
 * no globbing; and, as on the host side (identity.test.ts), links in the guest's /etc are replaced, not followed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { REPO_ROOT } from '../helpers/substrate-image.js';

const SCRIPT = path.join(REPO_ROOT, 'images', 'rootfs', 'usr', 'sbin', 'computer-identity');
const ID = '0123456789abcdef0123456789abcdef';
const HOST = 'computer-0123456789ab';
const BOOT = 'console=ttyS0 root=/dev/vda ro quiet loglevel=3 panic=-1 reboot=t';
const IMAGE_FILES = { 'machine-id': '', hostname: 'computer\n', hosts: '127.0.0.1\tlocalhost\n127.0.1.1\tcomputer\n::1\tlocalhost ip6-localhost ip6-loopback\n' };

/** A guest root with the image's files, a command line, and the script run on them from `cwd`. */
function boot(t: Test, cmdline: string, opts: { cwdFiles?: string[] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vm-identity-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const root = path.join(dir, 'root');
  fs.mkdirSync(path.join(root, 'etc'), { recursive: true });
  for (const [name, text] of Object.entries(IMAGE_FILES)) fs.writeFileSync(path.join(root, 'etc', name), text);
  fs.writeFileSync(path.join(dir, 'cmdline'), `${cmdline}\n`);
  const cwd = path.join(dir, 'cwd');
  fs.mkdirSync(cwd);
  for (const f of opts.cwdFiles ?? []) fs.writeFileSync(path.join(cwd, f), '');
  const run = () => execFileSync('bash', [SCRIPT, path.join(dir, 'cmdline'), root], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const etc = () => Object.fromEntries(fs.readdirSync(path.join(root, 'etc')).sort().map((n) => [n, fs.readFileSync(path.join(root, 'etc', n), 'utf8')]));
  return { dir, root, run, etc };
}

t.test('a well-formed identity is written and its hostname printed', async (t) => {
  const g = boot(t, `${BOOT} computer.net=10.201.0.7/16,10.201.0.1 computer.machine_id=${ID} computer.hostname=${HOST}`);
  t.equal(g.run(), `${HOST}\n`, 'the hostname to set');
  t.same(g.etc(), {
    hostname: 'computer-0123456789ab\n',
    hosts: '127.0.0.1\tlocalhost\n127.0.1.1\tcomputer-0123456789ab computer\n::1\tlocalhost ip6-localhost ip6-loopback\n',
    'machine-id': '0123456789abcdef0123456789abcdef\n',
  }, 'the three files, `computer` kept as an alias, nothing left beside them');
  t.equal(fs.statSync(path.join(g.root, 'etc', 'machine-id')).mode & 0o777, 0o644);
  t.equal(g.run(), `${HOST}\n`, 'the next boot writes the same again');
  t.same(Object.keys(g.etc()), ['hostname', 'hosts', 'machine-id']);
});

t.test('anything else keeps the image identity and writes nothing', async (t) => {
  const refused: Array<[string, string, string[]?]> = [
    ['none given', BOOT],
    ['uppercase hex', `computer.machine_id=0123456789ABCDEF0123456789abcdef computer.hostname=${HOST}`],
    ['31 hex', `computer.machine_id=${ID.slice(1)} computer.hostname=${HOST}`],
    ['33 hex', `computer.machine_id=${ID}0 computer.hostname=${HOST}`],
    ['a hostname of 11 hex', `computer.machine_id=${ID} computer.hostname=computer-0123456789a`],
    ['a hostname of 13 hex', `computer.machine_id=${ID} computer.hostname=computer-0123456789abc`],
    ['another hostname prefix', `computer.machine_id=${ID} computer.hostname=mch_0123456789ab`],
    ['shell characters', `computer.machine_id=${ID} computer.hostname=computer-0123456789ab;reboot`],
    ['only the machine-id', `${BOOT} computer.machine_id=${ID}`],
    ['only the hostname', `${BOOT} computer.hostname=${HOST}`],
    ['the machine-id twice', `computer.machine_id=${ID} computer.machine_id=${ID} computer.hostname=${HOST}`],
    ['the hostname twice', `computer.machine_id=${ID} computer.hostname=${HOST} computer.hostname=${HOST}`],
    // Were the words globbed, these would expand to the well-formed names of the files in the working directory.
    ['glob patterns', 'computer.machine_id=* computer.hostname=computer-0123456789a?', [`computer.machine_id=${ID}`, `computer.hostname=${HOST}`]],
  ];
  for (const [what, cmdline, cwdFiles] of refused) {
    const g = boot(t, cmdline, cwdFiles ? { cwdFiles } : {});
    t.equal(g.run(), 'computer\n', `${what}: the image's hostname`);
    t.same(g.etc(), IMAGE_FILES, `${what}: nothing written`);
  }
});

t.test("links in the guest's /etc are replaced, not followed; an /etc link is refused", async (t) => {
  const g = boot(t, `computer.machine_id=${ID} computer.hostname=${HOST}`);
  const outside = path.join(g.dir, 'outside');
  fs.writeFileSync(outside, 'outside file\n');
  const etc = path.join(g.root, 'etc');
  fs.rmSync(path.join(etc, 'machine-id'));
  fs.symlinkSync(outside, path.join(etc, 'machine-id'));
  fs.symlinkSync(outside, path.join(etc, '.hosts.computer-new'));
  fs.rmSync(path.join(etc, 'hostname'));
  fs.mkdirSync(path.join(etc, 'hostname'));
  const outsideDir = path.join(g.dir, 'outside-dir');
  fs.mkdirSync(outsideDir);
  fs.rmSync(path.join(etc, 'hosts'));
  fs.symlinkSync(outsideDir, path.join(etc, 'hosts'));
  t.equal(g.run(), `${HOST}\n`);
  t.equal(fs.readFileSync(outside, 'utf8'), 'outside file\n', 'the link target is untouched');
  t.same(fs.readdirSync(outsideDir), [], 'nothing moved into a directory a link names');
  t.ok(fs.lstatSync(path.join(etc, 'machine-id')).isFile(), 'a regular file now');
  t.same(g.etc(), {
    hostname: 'computer-0123456789ab\n',
    hosts: '127.0.0.1\tlocalhost\n127.0.1.1\tcomputer-0123456789ab computer\n::1\tlocalhost ip6-localhost ip6-loopback\n',
    'machine-id': '0123456789abcdef0123456789abcdef\n',
  }, 'a directory in the way replaced, and no temporary file left');

  const h = boot(t, `computer.machine_id=${ID} computer.hostname=${HOST}`);
  const elsewhere = path.join(h.dir, 'elsewhere');
  fs.renameSync(path.join(h.root, 'etc'), elsewhere);
  fs.symlinkSync(elsewhere, path.join(h.root, 'etc'));
  t.equal(h.run(), 'computer\n', "an /etc link: the image's hostname");
  t.same(fs.readdirSync(elsewhere).sort(), ['hostname', 'hosts', 'machine-id']);
  t.same(Object.fromEntries(fs.readdirSync(elsewhere).sort().map((n) => [n, fs.readFileSync(path.join(elsewhere, n), 'utf8')])), IMAGE_FILES, 'nothing written through it');
});

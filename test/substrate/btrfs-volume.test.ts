/**
 * The loop volume's mount argv (pinned) and the read-only check the substrate watch uses, on real mounts: a
 * tmpfs mounted read-only is seen, a writable one is not, without writing to either. Needs root.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loopMountArgs, readOnlyFs } from '../../control-plane/src/substrate/disks/btrfs.js';

t.test('loop mount argv', async (t) => {
  t.same(loopMountArgs('/data/substrate/disks.btrfs', '/data/substrate/disks'), ['-o', 'loop,discard=async,noatime', '/data/substrate/disks.btrfs', '/data/substrate/disks']);
});

t.test('readOnlyFs', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ro-check-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]);
  t.teardown(() => {
    execFileSync('umount', [dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  t.equal(readOnlyFs(dir), false, 'a writable mount');
  execFileSync('mount', ['-o', 'remount,ro', dir]);
  t.equal(readOnlyFs(dir), true, 'remounted read-only');
  t.equal(readOnlyFs(path.join(dir, 'missing')), false, 'a missing path is not a read-only filesystem');
});

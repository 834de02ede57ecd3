// Real overlayfs mounts over the layer store, in both container disk modes: plain directories (captures
// copy) and btrfs subvolumes on a loop-mounted volume (captures snapshot). What a machine sees through its
// mounted disk must be the same after captures, forks and flattening as before them.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultVolumeBytes, ensureBtrfsVolume, isSubvolume } from '../../control-plane/src/substrate/disks/btrfs.js';
import { LayerStore } from '../../control-plane/src/substrate/disks/layer-store.js';
import { isMounted, mountOverlay, OverlayBackend, unmount } from '../../control-plane/src/substrate/disks/overlay-backend.js';

type Tree = Record<string, string>;

/** Everything a process sees under a directory: type, mode, owner and content of each entry. */
function readTree(dir: string, rel = ''): Tree {
  const out: Tree = {};
  for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
    const r = path.join(rel, name);
    const p = path.join(dir, r);
    const st = fs.lstatSync(p);
    const meta = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
    if (st.isSymbolicLink()) out[r] = `link ${fs.readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[r] = `dir ${meta}`;
      Object.assign(out, readTree(dir, r));
    } else out[r] = `file ${meta} ${fs.readFileSync(p, 'utf8')}`;
  }
  return out;
}

function makeBase(root: string): string {
  const base = path.join(root, 'base');
  fs.mkdirSync(path.join(base, 'd'), { recursive: true });
  fs.mkdirSync(path.join(base, 'e', 'sub'), { recursive: true });
  fs.writeFileSync(path.join(base, 'a.txt'), 'base a');
  fs.writeFileSync(path.join(base, 'b.txt'), 'base b');
  fs.writeFileSync(path.join(base, 'd', 'x'), 'base x');
  fs.writeFileSync(path.join(base, 'd', 'y'), 'base y');
  fs.writeFileSync(path.join(base, 'e', 'sub', 'deep'), 'base deep');
  fs.symlinkSync('a.txt', path.join(base, 'l'));
  return base;
}

async function withMounted<T>(store: LayerStore, diskId: string, mnt: string, fn: (m: string) => T): Promise<T> {
  const d = store.disk(diskId);
  await mountOverlay(mnt, store.lowerPaths(d), d.base, store.blobPath(d.writable));
  try {
    return fn(mnt);
  } finally {
    await unmount(mnt);
  }
}

const MB = 1024 * 1024;

for (const mode of ['copy', 'btrfs'] as const) {
  t.test(`${mode}: captures, forks and flattening keep what the machine sees`, async (t) => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `ovl-${mode}-`));
    const storeDir = path.join(root, 'store');
    t.teardown(() => {
      for (const m of [path.join(root, 'm'), storeDir]) if (isMounted(m)) execFileSync('umount', ['-l', m]);
      fs.rmSync(root, { recursive: true, force: true });
    });
    if (mode === 'btrfs') {
      const vol = ensureBtrfsVolume({ dir: storeDir, image: path.join(root, 'vol.btrfs'), sizeBytes: 2 * 1024 ** 3 });
      t.same(vol, { kind: 'btrfs', how: 'loop', quotas: true }, 'a loop-mounted btrfs volume, qgroups on (disk limits)');
      const again = ensureBtrfsVolume({ dir: storeDir, image: path.join(root, 'vol.btrfs'), sizeBytes: 2 * 1024 ** 3 });
      t.equal(again.kind, 'btrfs', 'idempotent: the mounted volume is recognised');
    }
    const base = makeBase(root);
    const mnt = path.join(root, 'm');
    // maxDepth 2: the third capture of a chain is flattened.
    const store = new LayerStore(storeDir, new OverlayBackend({ snapshots: mode === 'btrfs' }), { maxDepth: 2 });
    await store.newDisk({ id: 'a', base, top: null, sizeBytes: MB });
    if (mode === 'btrfs') t.ok(isSubvolume(store.blobPath(store.disk('a').writable)), 'the writable blob is a subvolume');

    // Round 1: modify, delete (whiteout), replace a directory (opaque), create.
    const seen1 = await withMounted(store, 'a', mnt, (m) => {
      fs.writeFileSync(path.join(m, 'a.txt'), 'one');
      fs.rmSync(path.join(m, 'b.txt'));
      fs.rmSync(path.join(m, 'd'), { recursive: true });
      fs.mkdirSync(path.join(m, 'd'));
      fs.writeFileSync(path.join(m, 'd', 'z'), 'one z');
      fs.mkdirSync(path.join(m, 'n'));
      fs.writeFileSync(path.join(m, 'n', 'f'), 'one f');
      fs.chmodSync(path.join(m, 'n', 'f'), 0o600);
      return readTree(m);
    });
    t.notOk('b.txt' in seen1);
    t.same(Object.keys(seen1).filter((k) => k.startsWith('d/')), ['d/z'], 'the replaced directory hides the base one');
    const s1 = await store.freeze('a', 's1');
    if (mode === 'btrfs') {
      t.ok(isSubvolume(store.blobPath(s1.id)));
      t.throws(() => fs.writeFileSync(path.join(store.blobPath(s1.id), 'diff', 'nope'), 'x'), { code: 'EROFS' }, 'a layer is read-only');
    }

    // Round 2: recreate over a whiteout, delete a file of layer 1, delete a base directory, add a file.
    const seen2 = await withMounted(store, 'a', mnt, (m) => {
      fs.writeFileSync(path.join(m, 'b.txt'), 'two b');
      fs.rmSync(path.join(m, 'n', 'f'));
      fs.rmSync(path.join(m, 'e'), { recursive: true });
      fs.writeFileSync(path.join(m, 'c.txt'), 'two c');
      return readTree(m);
    });
    // A live capture (the disk stays mounted) while the chain is below the limit: a plain layer.
    const live = await withMounted(store, 'a', mnt, async () => store.copyToLayer('a', 'live2'));
    t.equal(live.parent, s1.id);
    if (mode === 'btrfs') t.ok(isSubvolume(store.blobPath(live.id)), 'a live capture is a snapshot');
    const s2 = await store.freeze('a', 's2');
    t.same(store.layerChain(store.disk('a').top), [s2.id, s1.id]);

    // Round 3: a directory over a whiteout of a base directory, and overwrite again.
    const seen3 = await withMounted(store, 'a', mnt, (m) => {
      fs.mkdirSync(path.join(m, 'e'));
      fs.writeFileSync(path.join(m, 'e', 'new'), 'three new');
      fs.writeFileSync(path.join(m, 'a.txt'), 'three');
      return readTree(m);
    });
    t.notOk('e/sub' in seen3, 'the recreated directory does not show the base content');

    // A live capture at the limit is flattened, and the disk keeps its chain.
    const liveFlat = await withMounted(store, 'a', mnt, async () => store.copyToLayer('a', 'live3'));
    t.equal(liveFlat.parent, null, 'flattened onto the base');
    t.same(store.layerChain(store.disk('a').top), [s2.id, s1.id]);
    const s3 = await store.freeze('a', 's3');
    t.equal(s3.parent, null, 'a stopped capture at the limit is flattened');
    t.same(store.layerChain(store.disk('a').top), [s3.id]);

    t.same(await withMounted(store, 'a', mnt, readTree), seen3, 'the machine sees the same files on the flattened chain');
    for (const [layer, seen, name] of [
      [s1.id, seen1, 's1'],
      [live.id, seen2, 'live2'],
      [s2.id, seen2, 's2'],
      [liveFlat.id, seen3, 'live3 (flattened)'],
      [s3.id, seen3, 's3 (flattened)'],
    ] as const) {
      const fork = await store.newDisk({ base, top: layer, sizeBytes: MB });
      t.same(await withMounted(store, fork.id, mnt, readTree), seen, `a fork of ${name} sees what was captured`);
      await store.deleteDisk(fork.id);
    }

    for (const [l, h] of [
      [s1.id, 's1'],
      [live.id, 'live2'],
      [s2.id, 's2'],
      [liveFlat.id, 'live3'],
      [s3.id, 's3'],
    ] as const)
      await store.unpin(l, h);
    await store.deleteDisk('a');
    t.same(store.layers(), [], 'every layer freed');
    t.same(fs.readdirSync(path.join(storeDir, 'blobs')), [], 'no blobs left (subvolumes deleted too)');
  });
}

t.test('a new loop volume is sized to the host\'s free space minus a reserve', async (t) => {
  const GiB = 1024 ** 3;
  // 252 GiB filesystem, 76 GiB free: the reserve is a tenth of the filesystem (25.2 GiB).
  t.equal(defaultVolumeBytes({ blocks: 252 * 262144, bavail: 76 * 262144, bsize: 4096 }), 54546084660);
  // 10 GiB filesystem, 5 GiB free: the reserve is at least 2 GiB.
  t.equal(defaultVolumeBytes({ blocks: 10 * 262144, bavail: 5 * 262144, bsize: 4096 }), 3 * GiB);
  t.equal(defaultVolumeBytes({ blocks: 10 * 262144, bavail: 262144, bsize: 4096 }), GiB, 'never below 1 GiB');
});


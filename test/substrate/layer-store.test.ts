import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LayerStore, MAX_CHAIN_DEPTH } from '../../control-plane/src/substrate/disks/layer-store.js';
import { OverlayBackend, overlayOptions } from '../../control-plane/src/substrate/disks/overlay-backend.js';

function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'));
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

const MB = 1024 * 1024;

t.test('capture freezes the writable blob, forks stand on it, GC frees only unreferenced layers', async (t) => {
  const root = tmp();
  const base = path.join(root, 'base');
  fs.mkdirSync(base);
  const store = new LayerStore(path.join(root, 'store'), new OverlayBackend());
  const a = await store.newDisk({ id: 'a', base, top: null, sizeBytes: 10 * MB });
  t.equal(a.top, null);
  const aw = store.blobPath(a.writable);
  fs.writeFileSync(path.join(aw, 'diff', 'hello.txt'), 'hi from a');
  const du = await store.diskUsage('a');
  t.equal(du.provisioned_bytes, 10 * MB, 'provisioned size (hot storage)');
  t.ok(du.writable_bytes > 0, 'bytes written to the writable blob');
  t.same(du.chain, []);

  const l1 = await store.freeze('a', 'snap1');
  t.equal(l1.id, a.writable, 'the writable blob became the layer in place');
  t.equal(l1.parent, null);
  t.ok(l1.bytes > 0, 'layer bytes measured');
  t.notOk(fs.existsSync(path.join(aw, 'work')), 'sealed layer has no workdir');
  t.equal(store.disk('a').top, l1.id);
  t.not(store.disk('a').writable, l1.id, 'disk got a new writable blob');
  t.equal(store.refCount(l1.id), 2, 'pinned by snap1 and referenced by disk a');

  const b = await store.newDisk({ id: 'b', base, top: l1.id, sizeBytes: 10 * MB });
  t.equal(store.refCount(l1.id), 3, 'fork adds a reference');
  t.same(store.lowerPaths(b), [store.blobPath(l1.id), base]);
  t.equal(
    overlayOptions(store.lowerPaths(b), base, store.blobPath(b.writable)),
    `lowerdir=${store.blobPath(l1.id)}/diff:${base},upperdir=${store.blobPath(b.writable)}/diff,workdir=${store.blobPath(b.writable)}/work,redirect_dir=off,metacopy=off`,
  );

  // a second capture of b chains on l1
  const l2 = await store.freeze('b', 'snap2');
  t.equal(l2.parent, l1.id);
  t.same(store.layerChain(store.disk('b').top), [l2.id, l1.id]);
  t.equal(store.refCount(l1.id), 3, 'child layer l2 replaces disk b as a reference');

  t.same(await store.unpin(l1.id, 'snap1'), [], 'still referenced: nothing freed');
  t.same(await store.deleteDisk('a'), [], 'l1 still under l2');
  t.ok(fs.existsSync(store.blobPath(l1.id)));
  t.same(await store.unpin(l2.id, 'snap2'), [], 'l2 still under disk b');
  const freed = await store.deleteDisk('b');
  t.same(freed.sort(), [l1.id, l2.id].sort(), 'deleting the last disk frees the whole chain');
  t.notOk(fs.existsSync(store.blobPath(l1.id)));
  t.notOk(fs.existsSync(store.blobPath(l2.id)));
  t.same(fs.readdirSync(path.join(root, 'store', 'blobs')), [], 'no blobs left');
  t.ok(fs.existsSync(base), 'the base is never deleted');
});

t.test('copyToLayer leaves the disk chain alone; restore replaces the writable blob', async (t) => {
  const root = tmp();
  const base = path.join(root, 'base');
  fs.mkdirSync(base);
  const store = new LayerStore(path.join(root, 'store'), new OverlayBackend());
  const a = await store.newDisk({ id: 'a', base, top: null, sizeBytes: MB });
  fs.writeFileSync(path.join(store.blobPath(a.writable), 'diff', 'f'), 'x'.repeat(10000));
  const copy = await store.copyToLayer('a', 'snap', async (src, dst) => {
    fs.cpSync(src, dst, { recursive: true });
  });
  t.equal(store.disk('a').top, null, 'disk chain unchanged');
  t.equal(store.disk('a').writable, a.writable);
  t.equal(fs.readFileSync(path.join(store.blobPath(copy.id), 'diff', 'f'), 'utf8').length, 10000);
  t.ok(copy.bytes >= 10000);

  const failed = store.copyToLayer('a', 'x', async (_s, dst) => {
    fs.mkdirSync(dst, { recursive: true });
    throw new Error('copy broke');
  });
  await t.rejects(failed, /copy broke/);
  t.equal(store.layers().length, 1, 'a failed copy leaves no layer');

  // restore: new empty writable on the copy; the old writable blob goes away
  const r = await store.replaceDisk('a', copy.id, base);
  t.equal(r.top, copy.id);
  t.notOk(fs.existsSync(store.blobPath(a.writable)));
  t.same(fs.readdirSync(path.join(store.blobPath(r.writable), 'diff')), []);

  // state survives a reopen (the control plane restarts)
  const again = new LayerStore(path.join(root, 'store'), new OverlayBackend());
  t.equal(again.disk('a').top, copy.id);
  t.equal(again.refCount(copy.id), 2);
  const u = await again.usage();
  t.equal(u.disks[0]!.provisioned_bytes, MB);
  t.same(u.layers.map((l) => l.pins), [['snap']]);

  await t.rejects(store.newDisk({ base, top: 'nope', sizeBytes: MB }), { code: 'not_found' });
});

t.test('chains are bounded: a capture past the limit makes a flattened layer', async (t) => {
  const root = tmp();
  const base = path.join(root, 'base');
  fs.mkdirSync(base);
  const store = new LayerStore(path.join(root, 'store'), new OverlayBackend());
  t.equal(store.maxDepth, MAX_CHAIN_DEPTH);
  await store.newDisk({ id: 'a', base, top: null, sizeBytes: MB });
  for (let i = 0; i < MAX_CHAIN_DEPTH; i++) {
    fs.writeFileSync(path.join(store.blobPath(store.disk('a').writable), 'diff', `f${i}`), String(i));
    await store.freeze('a', `s${i}`);
  }
  t.equal(store.layerChain(store.disk('a').top).length, MAX_CHAIN_DEPTH);
  // A live VM capture cannot shorten the running chain: refused, nothing changes.
  const before = JSON.stringify(store.disk('a'));
  await t.rejects(
    store.freeze('a', 'live', async () => {
      throw new Error('must not be called');
    }),
    { code: 'conflict' },
  );
  t.equal(JSON.stringify(store.disk('a')), before);

  fs.writeFileSync(path.join(store.blobPath(store.disk('a').writable), 'diff', 'last'), 'L');
  const flat = await store.freeze('a', 'one-more');
  t.equal(flat.parent, null, 'the new layer sits on the base');
  t.same(store.layerChain(store.disk('a').top), [flat.id], 'the disk now stands on one layer');
  t.same(fs.readdirSync(path.join(store.blobPath(flat.id), 'diff')).sort(), [...Array.from({ length: MAX_CHAIN_DEPTH }, (_, i) => `f${i}`), 'last'].sort());
  t.equal(store.layers().length, MAX_CHAIN_DEPTH + 1, 'pinned layers stay');
  for (let i = MAX_CHAIN_DEPTH - 1; i >= 0; i--) await store.unpin(store.layers().find((l) => l.pins.includes(`s${i}`))!.id, `s${i}`);
  t.same(store.layers().map((l) => l.id), [flat.id], 'unpinned layers of the old chain are freed');
});

t.test('compactDisk flattens a stopped disk with a deep chain', async (t) => {
  const root = tmp();
  const base = path.join(root, 'base');
  fs.mkdirSync(base);
  const store = new LayerStore(path.join(root, 'store'), new OverlayBackend(), { maxDepth: 4 });
  await store.newDisk({ id: 'a', base, top: null, sizeBytes: MB });
  for (let i = 0; i < 3; i++) {
    fs.writeFileSync(path.join(store.blobPath(store.disk('a').writable), 'diff', `f${i}`), String(i));
    await store.freeze('a', `s${i}`);
  }
  fs.writeFileSync(path.join(store.blobPath(store.disk('a').writable), 'diff', 'w'), 'unsaved');
  t.equal(await store.compactDisk('a', 4), false, 'below the threshold: untouched');
  t.equal(await store.compactDisk('a', 3), true);
  const top = store.disk('a').top!;
  t.equal(store.layer(top).parent, null);
  t.same(store.layer(top).pins, [], 'held by the disk only');
  t.same(fs.readdirSync(path.join(store.blobPath(top), 'diff')).sort(), ['f0', 'f1', 'f2', 'w'], 'the writable content is kept');
  t.same(fs.readdirSync(path.join(store.blobPath(store.disk('a').writable), 'diff')), []);
  await store.unpin(store.layers().find((l) => l.pins.includes('s0'))!.id, 's0');
  t.equal(store.layers().length, 4, 's1 and s2 still pinned, s0 still under s1, plus the flattened layer');
  await store.unpin(store.layers().find((l) => l.pins.includes('s2'))!.id, 's2');
  await store.unpin(store.layers().find((l) => l.pins.includes('s1'))!.id, 's1');
  t.same(store.layers().map((l) => l.id), [top]);
  await store.deleteDisk('a');
  t.same(fs.readdirSync(path.join(root, 'store', 'blobs')), [], 'no blobs left');
});

t.test('a crash mid-capture leaks no blob: blobs no record names are deleted when the store opens; pins listed', async (t) => {
  const root = tmp();
  const base = path.join(root, 'base');
  fs.mkdirSync(base);
  const dir = path.join(root, 'store');
  const store = new LayerStore(dir, new OverlayBackend());
  const a = await store.newDisk({ id: 'a', base, top: null, sizeBytes: 10 * MB });
  const l1 = await store.freeze('a', 'snp_one');
  // What a process killed in the middle of copyToLayer / freeze leaves: a complete-looking blob the state
  // file does not name.
  const orphan = path.join(dir, 'blobs', 'blb_00000000deadbeef');
  fs.mkdirSync(path.join(orphan, 'diff'), { recursive: true });
  fs.writeFileSync(path.join(orphan, 'diff', 'half-copied'), 'x');
  const reopened = new LayerStore(dir, new OverlayBackend());
  await reopened.settled();
  t.notOk(fs.existsSync(orphan), 'the orphan blob is gone');
  t.ok(fs.existsSync(reopened.blobPath(l1.id)), 'the layer stays');
  t.ok(fs.existsSync(reopened.blobPath(reopened.disk('a').writable)), "the disk's writable blob stays");
  t.same(reopened.pins().map((p) => [p.layerId, p.holder]), [[l1.id, 'snp_one']]);
  t.same(await reopened.unpin('blb_gone', 'snp_one'), [], 'releasing an unknown layer is not an error (a retried release)');
  t.same(await reopened.unpin(l1.id, 'snp_one'), [], 'still under disk a');
  t.same(reopened.pins(), []);
  await reopened.deleteDisk(a.id);
});

// Real qcow2 chains (qemu-img, qemu-io) under the layer store: captures, flattening past the depth limit and
// compaction keep every byte a guest would read.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LayerStore } from '../../control-plane/src/substrate/disks/layer-store.js';
import { Qcow2Backend } from '../../control-plane/src/substrate/disks/qcow2-backend.js';
import { readsPattern as reads, writePattern as write } from '../helpers/qemu-io.js';

const MB = 1024 * 1024;

function backingDepth(file: string): number {
  const info = JSON.parse(execFileSync('qemu-img', ['info', '--backing-chain', '--output=json', '-U', file], { encoding: 'utf8' })) as unknown[];
  return info.length;
}

t.test('qcow2: flattening past the limit and compaction keep the data', async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'qcow2-layers-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  const base = path.join(root, 'base.qcow2');
  execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', base, '64M']);
  write(base, 0x41, 0);
  write(base, 0x41, 1);
  write(base, 0x41, 2);

  const store = new LayerStore(path.join(root, 'store'), new Qcow2Backend(), { maxDepth: 2 });
  await store.newDisk({ id: 'a', base, top: null, sizeBytes: 64 * MB });
  const top = () => store.blobPath(store.disk('a').writable);
  t.ok(reads(top(), 0x41, 0), 'a new disk reads the base');

  write(top(), 0x42, 1);
  const s1 = await store.freeze('a', 's1');
  write(top(), 0x43, 2);
  const s2 = await store.freeze('a', 's2');
  t.same(store.layerChain(store.disk('a').top), [s2.id, s1.id]);
  write(top(), 0x44, 0);
  const s3 = await store.freeze('a', 's3');
  t.equal(s3.parent, null, 'the third capture is flattened onto the base');
  t.equal(backingDepth(top()), 3, 'writable -> flattened layer -> base');
  t.ok(reads(top(), 0x44, 0) && reads(top(), 0x42, 1) && reads(top(), 0x43, 2), 'every write of the old chain reads back');
  t.ok(s3.bytes < 8 * MB, 'only what differs from the base is in the flattened layer');
  t.ok(reads(store.blobPath(s2.id), 0x43, 2) && reads(store.blobPath(s2.id), 0x41, 0), 'the pinned layer s2 still reads as captured');

  // compaction of a stopped disk (what a VM start does after many live captures)
  write(top(), 0x45, 3);
  const s4 = await store.freeze('a', 's4');
  t.same(store.layerChain(store.disk('a').top), [s4.id, s3.id]);
  write(top(), 0x46, 4);
  t.equal(await store.compactDisk('a', 2), true);
  t.equal(backingDepth(top()), 3);
  for (const [p, off] of [
    [0x44, 0],
    [0x42, 1],
    [0x43, 2],
    [0x45, 3],
    [0x46, 4],
  ] as const)
    t.ok(reads(top(), p, off), `offset ${off} MiB reads 0x${p.toString(16)} after compaction`);

  for (const [l, h] of [
    [s1.id, 's1'],
    [s2.id, 's2'],
    [s3.id, 's3'],
    [s4.id, 's4'],
  ] as const)
    await store.unpin(l, h);
  await store.deleteDisk('a');
  t.same(store.layers(), []);
  t.same(fs.readdirSync(path.join(root, 'store', 'blobs')), [], 'no blobs left');
});

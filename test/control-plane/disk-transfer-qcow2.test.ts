// Moving vm layers (qcow2 files) between two hosts' layer stores over a loopback HTTP body: a chain of two
// captures moves, a disk built on it there reads every write through the receiver's own base image, a second
// move sends nothing, and a body with one flipped byte (which only the SHA-256 can catch: qcow2 data has no
// checksum of its own) registers nothing.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { layerHosts, type Moved } from '../helpers/layer-hosts.js';
import { readsPattern as reads, writePattern as write } from '../helpers/qemu-io.js';

const MB = 1024 * 1024;

function backingFile(file: string): string {
  return (JSON.parse(execFileSync('qemu-img', ['info', '--output=json', '-U', file], { encoding: 'utf8' })) as { 'backing-filename': string })['backing-filename'];
}

const received = (m: Moved) => ('registered' in m.answer ? m.answer.registered : null);

t.test('qcow2: a chain moves once and a corrupted file registers nothing', async (t) => {
  const { a, b, move } = await layerHosts(t, 'qcow2');
  await a.store.newDisk({ id: 'disk-m1', base: a.base, top: null, sizeBytes: 64 * MB });
  const top = () => a.store.blobPath(a.store.disk('disk-m1').writable);
  write(top(), 0x42, 1);
  const l1 = await a.store.freeze('disk-m1', 'snp_1');
  write(top(), 0x43, 2);
  const l2 = await a.store.freeze('disk-m1', 'snp_2');

  const m = await move(a, b, l2.id, 'snp_2');
  t.equal(m.status, 200);
  t.same(received(m), [l1.id, l2.id], 'the chain is registered, oldest first');
  t.same(m.header.frames.map((f) => [f.layerId, f.parent]), [[l1.id, null], [l2.id, l1.id]]);
  t.equal(backingFile(b.store.blobPath(l1.id)), b.base, 'the bottom layer stands on host b\'s image');
  t.equal(backingFile(b.store.blobPath(l2.id)), b.store.blobPath(l1.id), 'the top one on its parent there');
  t.equal(fs.statSync(b.store.blobPath(l2.id)).mode & 0o777, 0o400, 'sealed');
  await b.store.newDisk({ id: 'disk-f1', base: b.base, top: l2.id, sizeBytes: 64 * MB });
  const fork = b.store.blobPath(b.store.disk('disk-f1').writable);
  t.ok(reads(fork, 0x41, 0) && reads(fork, 0x42, 1) && reads(fork, 0x43, 2), 'a disk on host b reads the image and both captures');

  const again = await move(a, b, l2.id, 'tpl_1');
  t.same([again.status, again.sent, received(again)], [200, 0, []], 'nothing sent the second time');

  write(top(), 0x44, 3);
  const l3 = await a.store.freeze('disk-m1', 'snp_3');
  const flipped = await move(a, b, l3.id, 'snp_3', {
    mangle: (body) => {
      const out = Buffer.from(body);
      out[out.length - 1000] = out[out.length - 1000]! ^ 0xff;
      return out;
    },
  });
  t.same([flipped.status, flipped.answer], [400, { code: 'invalid_request', message: `layer stream for ${l3.id} does not match its announced SHA-256` }]);
  t.same(flipped.header.frames.map((f) => f.layerId), [l3.id], 'only the new layer was sent');
  t.notOk(b.store.hasLayer(l3.id), 'not registered');
  t.notOk(fs.existsSync(b.store.blobPath(l3.id)), 'no blob left');
  t.same(fs.readdirSync(path.join(b.store.root, 'incoming')), [], 'nothing left in incoming/');
  const good = await move(a, b, l3.id, 'snp_3');
  t.same(received(good), [l3.id], 'it moves whole afterwards');
});

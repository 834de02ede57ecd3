// Moving container layers between two hosts' layer stores (two btrfs loop volumes on this machine) over a
// loopback HTTP body: a moved layer carries its files to a disk built on it there; a child of a layer the
// receiver holds, and a later live capture of the same machine, send only what changed; a second move sends
// nothing; a truncated or corrupted body leaves nothing registered and says why. Needs root (mounts).
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { TransferProgress } from '../../control-plane/src/substrate/disks/transfer/endpoint.js';
import { readTransfer } from '../../control-plane/src/substrate/disks/transfer/sink.js';
import { encodeHeader } from '../../control-plane/src/substrate/disks/transfer/wire.js';
import { layerHosts, onDisk, type Moved } from '../helpers/layer-hosts.js';

const MB = 1024 * 1024;

const sha = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const received = (m: Moved) => ('registered' in m.answer ? m.answer.registered : null);

t.test('btrfs: layers move once, incrementally, and a bad stream registers nothing', async (t) => {
  const { root, a, b, move } = await layerHosts(t, 'btrfs');
  const mnt = path.join(root, 'mnt');
  const big = crypto.randomBytes(8 * MB);
  const small = crypto.randomBytes(1 * MB);

  // A machine on host a writes files; a stopped capture makes layer l1.
  await a.store.newDisk({ id: 'disk-m1', base: a.base, top: null, sizeBytes: 64 * MB });
  await onDisk(a.store, 'disk-m1', mnt, (m) => {
    fs.mkdirSync(path.join(m, 'home'));
    fs.writeFileSync(path.join(m, 'home', 'note.txt'), 'written on host a\n');
    fs.writeFileSync(path.join(m, 'home', 'big.bin'), big);
    fs.rmSync(path.join(m, 'etc', 'image'));
  });
  const l1 = await a.store.freeze('disk-m1', 'snp_1');

  let last: TransferProgress | null = null;
  const m1 = await move(a, b, l1.id, 'snp_1', { onProgress: (p) => (last = p) });
  t.equal(m1.status, 200);
  t.same(received(m1), [l1.id], 'the layer is registered on host b');
  t.same(m1.header.frames.map((f) => [f.layerId, f.parent, f.deltaFrom]), [[l1.id, null, null]], 'one full stream');
  t.ok(m1.sent > 8 * MB && m1.sent < 9 * MB, `the whole layer travels (${m1.sent} bytes)`);
  t.same(last, { done: m1.sent, total: m1.sent }, 'progress reached the total');
  t.same(b.store.layer(l1.id).pins, ['snp_1'], 'pinned by the holder on host b');
  t.equal(b.store.layer(l1.id).base, b.base, 'standing on host b\'s own image');

  await b.store.newDisk({ id: 'disk-f1', base: b.base, top: l1.id, sizeBytes: 64 * MB });
  await onDisk(b.store, 'disk-f1', mnt, (m) => {
    t.equal(fs.readFileSync(path.join(m, 'home', 'note.txt'), 'utf8'), 'written on host a\n', 'a fork on host b reads the file');
    t.ok(fs.readFileSync(path.join(m, 'home', 'big.bin')).equals(big), 'and the 8 MiB one, byte for byte');
    t.notOk(fs.existsSync(path.join(m, 'etc', 'image')), 'the deletion (a whiteout) came along');
  });

  // Moving it again sends nothing; the second holder pins it.
  const again = await move(a, b, l1.id, 'tpl_1');
  t.same([again.status, again.header.frames.length, again.sent, received(again)], [200, 0, 0, []], 'nothing sent the second time');
  t.same(b.store.layer(l1.id).pins, ['snp_1', 'tpl_1']);

  // Two moves of one layer at once (two forks on host b): one registers it, the other finds it and pins it.
  await onDisk(a.store, 'disk-m1', mnt, (m) => fs.writeFileSync(path.join(m, 'home', 'twice.txt'), 'both forks\n'));
  const lt = await a.store.freeze('disk-m1', 'snp_t');
  const [t1, t2] = await Promise.all([move(a, b, lt.id, 'fork_1'), move(a, b, lt.id, 'fork_2')]);
  t.same([t1.status, t2.status, t1.header.frames.length, t2.header.frames.length], [200, 200, 1, 1], 'both sent it (neither held it when asked)');
  // Which of the two registers it depends on which receive runs first (they queue): exactly one does.
  t.same([received(t1), received(t2)].sort((x, y) => (y?.length ?? 0) - (x?.length ?? 0)), [[lt.id], []], 'registered once');
  t.same([...b.store.layer(lt.id).pins].sort(), ['fork_1', 'fork_2'], 'pinned by both');

  // A child of lt (a stopped capture: only its own diff) moves alone.
  await onDisk(a.store, 'disk-m1', mnt, (m) => fs.writeFileSync(path.join(m, 'home', 'small.bin'), small));
  const l2 = await a.store.freeze('disk-m1', 'snp_2');
  const m2 = await move(a, b, l2.id, 'snp_2');
  t.same(received(m2), [l2.id], 'only the child is registered');
  t.same(m2.header.frames.map((f) => f.layerId), [l2.id], 'the parent is not sent again');
  t.ok(m2.sent < 2 * MB, `the child's delta only (${m2.sent} bytes, the chain holds 9 MiB)`);
  await b.store.newDisk({ id: 'disk-f2', base: b.base, top: l2.id, sizeBytes: 64 * MB });
  await onDisk(b.store, 'disk-f2', mnt, (m) => {
    t.ok(fs.readFileSync(path.join(m, 'home', 'small.bin')).equals(small) && fs.readFileSync(path.join(m, 'home', 'big.bin')).equals(big), 'both layers read on host b');
  });

  // Live captures of one running machine are btrfs snapshots of its writable blob: the second moves as a
  // delta (btrfs send -p) against the first, which host b holds.
  await a.store.newDisk({ id: 'disk-m2', base: a.base, top: null, sizeBytes: 64 * MB });
  const live = await onDisk(a.store, 'disk-m2', mnt, async (m) => {
    fs.writeFileSync(path.join(m, 'big.bin'), big);
    const s1 = await a.store.copyToLayer('disk-m2', 'snp_3');
    fs.writeFileSync(path.join(m, 'small.bin'), small);
    const s2 = await a.store.copyToLayer('disk-m2', 'snp_4');
    return { s1, s2 };
  });
  const m3 = await move(a, b, live.s1.id, 'snp_3');
  t.ok(m3.sent > 8 * MB, 'the first live capture travels whole');
  const m4 = await move(a, b, live.s2.id, 'snp_4');
  t.same(m4.header.frames.map((f) => [f.layerId, f.deltaFrom]), [[live.s2.id, live.s1.id]], 'a delta against the earlier capture');
  t.ok(m4.sent < 2 * MB, `only what changed since (${m4.sent} bytes, the layer holds 9 MiB)`);
  await b.store.newDisk({ id: 'disk-f3', base: b.base, top: live.s2.id, sizeBytes: 64 * MB });
  await onDisk(b.store, 'disk-f3', mnt, (m) => {
    t.ok(fs.readFileSync(path.join(m, 'big.bin')).equals(big) && fs.readFileSync(path.join(m, 'small.bin')).equals(small), 'the delta-built layer reads whole on host b');
  });

  // Bad streams: a layer b lacks, cut short or with one byte flipped.
  await onDisk(a.store, 'disk-m1', mnt, (m) => fs.writeFileSync(path.join(m, 'home', 'third.bin'), small));
  const l3 = await a.store.freeze('disk-m1', 'snp_5');
  const before = b.store.layers().map((l) => l.id).sort();
  const blobsBefore = fs.readdirSync(path.dirname(b.store.blobPath(l3.id))).sort();
  const nothingLeft = (what: string) => {
    t.notOk(b.store.hasLayer(l3.id), `${what}: not registered`);
    t.same(b.store.layers().map((l) => l.id).sort(), before, `${what}: host b's layers unchanged`);
    t.same(fs.readdirSync(path.dirname(b.store.blobPath(l3.id))).sort(), blobsBefore, `${what}: no blob left behind`);
  };

  const cut = await move(a, b, l3.id, 'snp_5', { mangle: (body) => body.subarray(0, body.length - 1000) });
  const announced = cut.header.frames[0]!.bytes;
  t.same([cut.status, cut.answer], [400, { code: 'invalid_request', message: `layer stream for ${l3.id} ended after ${announced - 1000} of its announced ${announced} bytes` }]);
  nothingLeft('truncated');

  const flipped = await move(a, b, l3.id, 'snp_5', {
    mangle: (body) => {
      const out = Buffer.from(body);
      const at = out.length - Math.floor(announced / 2);
      out[at] = out[at]! ^ 0xff;
      return out;
    },
  });
  t.same([flipped.status, flipped.answer], [400, { code: 'invalid_request', message: `layer stream for ${l3.id} does not match its announced SHA-256` }]);
  nothingLeft('one byte flipped');

  const trailing = await move(a, b, l3.id, 'snp_5', { mangle: (body) => Buffer.concat([body, Buffer.from('more')]) });
  t.same([trailing.status, trailing.answer], [400, { code: 'invalid_request', message: 'layer stream carries bytes after its last announced layer' }]);
  nothingLeft('bytes after the end');

  // A stream of another layer under l3's header (digest and size its own): it would create that layer's
  // subvolume, so it is refused before btrfs receive runs.
  const other = await a.store.freeze('disk-m2', 'snp_6');
  const otherBody = Buffer.concat(await (await a.source.export(other.id, [])).body.toArray());
  const { header: otherHeader, payload: otherPayload } = await readTransfer(Readable.from([otherBody]));
  const otherFrame = otherHeader.frames[0]!;
  const forged = { ...otherHeader, layer: l3.id, frames: [{ ...otherFrame, layerId: l3.id, parent: l3.parent }] };
  const otherStream = (await otherPayload.readExactly(otherFrame.bytes))!;
  const swapped = await move(a, b, l3.id, 'snp_5', { mangle: () => Buffer.concat([encodeHeader(forged), otherStream]) });
  t.same([swapped.status, swapped.answer], [400, { code: 'invalid_request', message: `layer stream for ${l3.id} could not be applied` }]);
  nothingLeft('another layer\'s stream');

  const good = await move(a, b, l3.id, 'snp_5');
  t.same(received(good), [l3.id], 'the same layer moves whole afterwards');
  t.equal(sha(path.join(b.store.blobPath(l3.id), 'diff', 'home', 'third.bin')), sha(path.join(a.store.blobPath(l3.id), 'diff', 'home', 'third.bin')));
  t.same(fs.readdirSync(path.join(a.store.root, 'transfer-out')), [], 'the sender kept no spooled stream');
});

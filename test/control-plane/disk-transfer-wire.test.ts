// The pure parts of moving layers between hosts: the transfer header's checks (an untrusted body), the first
// command of a btrfs send stream (a real stream's first 65 bytes, pinned), `btrfs subvolume show` parsing and
// the choice of the layer a btrfs delta is sent against.
import t from 'tap';
import { Readable } from 'node:stream';
import { parseSubvolumeShow } from '../../control-plane/src/substrate/disks/btrfs.js';
import { pickDeltaBase } from '../../control-plane/src/substrate/disks/transfer/btrfs-codec.js';
import { ByteReader } from '../../control-plane/src/substrate/disks/transfer/byte-reader.js';
import { readStreamStart } from '../../control-plane/src/substrate/disks/transfer/send-stream.js';
import { encodeHeader, readHeader, type TransferHeader } from '../../control-plane/src/substrate/disks/transfer/wire.js';

const SHA = 'a'.repeat(64);
const frame = (layerId: string, parent: string | null) => ({ layerId, parent, deltaFrom: null, bytes: 10, sha256: SHA, created_at: '2026-11-26T00:00:00.000Z' });
const header: TransferHeader = { version: 1, kind: 'btrfs', base: 'img-1', layer: 'blb_02', frames: [frame('blb_01', null), frame('blb_02', 'blb_01')] };

async function read(body: Buffer): Promise<TransferHeader> {
  return readHeader(new ByteReader(Readable.from([body])));
}
const refused = (message: string) => ({ code: 'invalid_request', message: `layer transfer header refused: ${message}` });
const len = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

t.test('transfer header', async (t) => {
  t.same(await read(encodeHeader(header)), header, 'round trip');
  const json = (o: unknown) => {
    const j = Buffer.from(JSON.stringify(o));
    return Buffer.concat([Buffer.from('LXF1'), len(j.length), j]);
  };
  t.same(await read(json(header)), header, 'the framing is LXF1, a u32 BE length, then JSON');
  await t.rejects(read(Buffer.from('GET / HTTP/1.1\r\n')), refused('not a layer transfer'));
  await t.rejects(read(Buffer.concat([Buffer.from('LXF1'), len(65 * 1024)])), refused('header of 66560 bytes exceeds 65536'));
  await t.rejects(read(Buffer.concat([Buffer.from('LXF1'), len(100), Buffer.from('{}')])), refused('the header is cut short'));
  await t.rejects(read(Buffer.concat([Buffer.from('LXF1'), len(3), Buffer.from('{{{')])), refused('the header is not JSON'));
  await t.rejects(read(json({ ...header, frames: [frame('../etc', null)], layer: '../etc' })), refused('bad field layer'));
  await t.rejects(read(json({ ...header, frames: [frame('blb_01', null), frame('blb_02', 'blb_09')] })), refused('frame 1 does not stand on frame 0'));
  await t.rejects(read(json({ ...header, layer: 'blb_03' })), refused('the last frame is not the layer asked for'));
  await t.rejects(read(json({ ...header, extra: 1 })), refused('bad field '));
});

// The first 65 bytes of `btrfs send` of a subvolume named l1 (btrfs-progs 6.2): stream header, then the
// subvol command (length 0x26, command 1, crc, PATH "l1", UUID, CTRANSID).
const SUBVOL_L1 = Buffer.from('62747266732d73747265616d0001000000260000000100dc40fc580f0002006c3101001000b02f394899f62943a1ca73e900090f97020008000700000000000000', 'hex');

t.test('the first command of a send stream', async (t) => {
  t.same(readStreamStart(SUBVOL_L1), { kind: 'ok', command: 'subvol', name: 'l1' });
  t.same(readStreamStart(SUBVOL_L1.subarray(0, 40)), { kind: 'more' }, 'a command not yet whole');
  const snap = Buffer.from(SUBVOL_L1);
  snap.writeUInt16LE(2, 21);
  t.same(readStreamStart(snap), { kind: 'ok', command: 'snapshot', name: 'l1' });
  const mkfile = Buffer.from(SUBVOL_L1);
  mkfile.writeUInt16LE(3, 21);
  t.same(readStreamStart(mkfile), { kind: 'bad', reason: 'the stream starts with command 3' });
  t.same(readStreamStart(Buffer.from('not-a-stream-at-all-xxxxxxxxxxxxxxx')), { kind: 'bad', reason: 'not a btrfs send stream' });
  const overrun = Buffer.from(SUBVOL_L1);
  overrun.writeUInt16LE(0x40, 29); // PATH claims 64 bytes in a 38-byte command
  t.same(readStreamStart(overrun), { kind: 'bad', reason: 'an attribute overruns its command' });
});

t.test('btrfs subvolume show and the delta base', async (t) => {
  const shown = parseSubvolumeShow(`blobs/l2
\tName: \t\t\tl2
\tUUID: \t\t\t5c96916c-1cee-aa4b-bc4c-1b3df34a8271
\tParent UUID: \t\t5cdd19d1-85b2-b144-ba73-0d63724a6b5a
\tReceived UUID: \t\t-
\tGeneration: \t\t14
\tGen at creation: \t11
\tFlags: \t\t\treadonly
`);
  t.same(shown, { uuid: '5c96916c-1cee-aa4b-bc4c-1b3df34a8271', parentUuid: '5cdd19d1-85b2-b144-ba73-0d63724a6b5a', receivedUuid: null, generation: 14 });

  const id = (uuid: string, parentUuid: string | null, generation: number) => ({ uuid, parentUuid, receivedUuid: null, generation });
  const layer = id('L', 'W', 30);
  t.equal(pickDeltaBase(id('L', null, 30), [{ id: 'x', ident: id('X', null, 1) }]), null, 'not a snapshot: a full stream');
  t.equal(pickDeltaBase(layer, [{ id: 'other', ident: id('O', 'Q', 29) }]), null, 'nothing related: a full stream');
  t.equal(pickDeltaBase(layer, [{ id: 'old', ident: id('S1', 'W', 10) }, { id: 'new', ident: id('S2', 'W', 20) }]), 'new', 'the newest sibling snapshot');
  t.equal(pickDeltaBase(layer, [{ id: 'new', ident: id('S2', 'W', 20) }, { id: 'src', ident: id('W', null, 5) }]), 'src', 'the subvolume it was snapshotted from first');
});

/**
 * Two layer stores on this machine standing for two hosts (each its own btrfs loop volume, or its own qcow2
 * directory, and its own copy of the guest image), and the loopback HTTP channel a layer moves over: the
 * receiver's `have`, the source's body posted to a server whose handler reads the header and hands the rest
 * to the sink. `mangle` changes the body on the way (a truncated or corrupted stream).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { AppError } from '../../shared/errors.js';
import { ensureBtrfsVolume, isMounted } from '../../control-plane/src/substrate/disks/btrfs.js';
import { LayerStore } from '../../control-plane/src/substrate/disks/layer-store.js';
import { mountOverlay, OverlayBackend, unmount } from '../../control-plane/src/substrate/disks/overlay-backend.js';
import { Qcow2Backend } from '../../control-plane/src/substrate/disks/qcow2-backend.js';
import { btrfsCodec } from '../../control-plane/src/substrate/disks/transfer/btrfs-codec.js';
import type { OnProgress, TransferEndpoint } from '../../control-plane/src/substrate/disks/transfer/endpoint.js';
import { qcow2Codec } from '../../control-plane/src/substrate/disks/transfer/qcow2-codec.js';
import { LayerSink, readTransfer, type ReceivedLayer } from '../../control-plane/src/substrate/disks/transfer/sink.js';
import { LayerSource } from '../../control-plane/src/substrate/disks/transfer/source.js';
import { totalBytes, type TransferHeader } from '../../control-plane/src/substrate/disks/transfer/wire.js';
import { writePattern } from './qemu-io.js';

interface Teardown {
  teardown(fn: () => Promise<void> | void): void;
}

export type LayerHostKind = 'btrfs' | 'qcow2';

export interface LayerHost {
  name: string;
  store: LayerStore;
  /** This host's copy of the guest image (a directory for containers, base.qcow2 for vms). */
  base: string;
  source: LayerSource;
  sink: LayerSink;
}

export interface Moved {
  header: TransferHeader;
  /** Payload bytes the source sent (the header's frames). */
  sent: number;
  status: number;
  /** The sink's answer: the received layer, or the error's code and message. */
  answer: ReceivedLayer | { code: string; message: string };
}

const IMAGE_ID = 'img-test-1';

/** Run `fn` on a container disk's files as a machine sees them (its overlay mounted at `mnt`), then unmount. */
export async function onDisk<T>(store: LayerStore, diskId: string, mnt: string, fn: (dir: string) => T | Promise<T>): Promise<T> {
  const d = store.disk(diskId);
  await mountOverlay(mnt, store.lowerPaths(d), d.base, store.blobPath(d.writable));
  try {
    return await fn(mnt);
  } finally {
    await unmount(mnt);
  }
}

function makeBase(dir: string, kind: LayerHostKind): string {
  if (kind === 'qcow2') {
    const base = path.join(dir, 'base.qcow2');
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', base, '64M']);
    writePattern(base, 0x41, 0);
    return base;
  }
  const base = path.join(dir, 'base');
  fs.mkdirSync(path.join(base, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(base, 'etc', 'image'), 'base image\n');
  return base;
}

function makeHost(root: string, name: string, kind: LayerHostKind, volumeBytes: number): LayerHost {
  const dir = path.join(root, name);
  fs.mkdirSync(dir, { recursive: true });
  const storeDir = path.join(dir, 'disks');
  let store: LayerStore;
  if (kind === 'btrfs') {
    const vol = ensureBtrfsVolume({ dir: storeDir, image: path.join(dir, 'disks.btrfs'), sizeBytes: volumeBytes });
    if (vol.kind !== 'btrfs') throw new Error(`no btrfs volume for ${name}: ${vol.reason}`);
    store = new LayerStore(storeDir, new OverlayBackend({ snapshots: true, quotas: vol.quotas }));
  } else store = new LayerStore(storeDir, new Qcow2Backend());
  const base = makeBase(dir, kind);
  const ep: TransferEndpoint = { store, codec: kind === 'btrfs' ? btrfsCodec : qcow2Codec, base: { path: base, id: IMAGE_ID } };
  return { name, store, base, source: new LayerSource(ep), sink: new LayerSink(ep) };
}

/** Hosts `a` and `b` under a fresh /tmp/disk-transfer-* root (or `prefix`*), unmounted and removed at teardown. */
export async function layerHosts(t: Teardown, kind: LayerHostKind, opts: { volumeBytes?: number; prefix?: string } = {}) {
  const root = fs.mkdtempSync(opts.prefix ?? '/tmp/disk-transfer-');
  const volumeBytes = opts.volumeBytes ?? 2 * 1024 ** 3;
  const a = makeHost(root, 'a', kind, volumeBytes);
  const b = makeHost(root, 'b', kind, volumeBytes);
  await Promise.all([a.store.settled(), b.store.settled()]);

  // The receiving host's handler: the header, then the payload to the sink (errors as code + message).
  const sinks = new Map<string, LayerHost>([[a.name, a], [b.name, b]]);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const host = sinks.get(url.searchParams.get('host') ?? '')!;
    const answer = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    readTransfer(req)
      .then(({ header, payload }) => host.sink.receive(header, payload, { holder: url.searchParams.get('holder') ?? '' }))
      .then(
        (r) => answer(200, r),
        (e: unknown) => (e instanceof AppError ? answer(e.status, { code: e.code, message: e.message }) : answer(500, { code: 'internal_error', message: String(e) })),
      );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;

  t.teardown(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    for (const h of [a, b]) {
      for (const d of h.store.disks()) await h.store.deleteDisk(d.id).catch(() => {});
      const m = path.join(root, h.name, 'disks');
      if (isMounted(m)) execFileSync('umount', ['-l', m]);
    }
    fs.rmSync(root, { recursive: true, force: true });
  });

  /**
   * Move `layerId` from one host to the other as the channel would: ask the receiver what it has, export, post.
   * `mangle` gets the whole body and returns what is posted instead.
   */
  async function move(from: LayerHost, to: LayerHost, layerId: string, holder: string, o: { mangle?: (body: Buffer) => Buffer; onProgress?: OnProgress } = {}): Promise<Moved> {
    const exported = await from.source.export(layerId, to.sink.have(), { onProgress: o.onProgress });
    const body: Buffer | http.IncomingMessage | import('node:stream').Readable = o.mangle ? o.mangle(Buffer.concat(await exported.body.toArray())) : exported.body;
    const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `/layers?host=${to.name}&holder=${holder}`, headers: { 'content-type': 'application/octet-stream' } }, (r) => {
        const parts: Buffer[] = [];
        r.on('data', (c: Buffer) => parts.push(c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, text: Buffer.concat(parts).toString() }));
      });
      req.on('error', reject);
      if (Buffer.isBuffer(body)) req.end(body);
      else body.pipe(req);
    });
    return { header: exported.header, sent: totalBytes(exported.header), status: res.status, answer: JSON.parse(res.text) as Moved['answer'] };
  }

  return { root, a, b, move };
}

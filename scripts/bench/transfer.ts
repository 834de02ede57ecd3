/**
 * Moving a layer between hosts (the `transfer` part of `npm run bench`): two layer stores on this machine (two
 * btrfs loop volumes standing for two hosts, test/helpers/layer-hosts.ts), 1 GiB of random data written into a
 * machine's disk and captured live, then moved over a loopback HTTP request: export (btrfs send spooled and
 * hashed on the sender), then the body posted, received (btrfs receive, SHA-256 checked) and registered. Then
 * a second live capture with 10 MiB more, moved as a delta against the first.
 * Run alone: `BENCH=transfer npm run bench`.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { layerHosts } from '../../test/helpers/layer-hosts.js';
import { line } from './stats.js';

const MiB = 1024 * 1024;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

/** Write `bytes` of random data into a file, 16 MiB at a time. */
function writeRandom(file: string, bytes: number): void {
  const fd = fs.openSync(file, 'w', 0o644);
  try {
    for (let done = 0; done < bytes; done += 16 * MiB) fs.writeSync(fd, crypto.randomBytes(Math.min(16 * MiB, bytes - done)));
  } finally {
    fs.closeSync(fd);
  }
}

export async function benchTransfer(opts: { samples?: number } = {}): Promise<void> {
  const samples = opts.samples ?? 2;
  const teardowns: Array<() => Promise<void> | void> = [];
  try {
    const { a, b, move } = await layerHosts({ teardown: (fn) => teardowns.push(fn) }, 'btrfs', { volumeBytes: 4 * 1024 ** 3 });
    const disk = await a.store.newDisk({ id: 'disk-bench', base: a.base, top: null, sizeBytes: 3 * 1024 ** 3 });
    const diff = path.join(a.store.blobPath(disk.writable), 'diff');
    writeRandom(path.join(diff, 'one-gib.bin'), 1024 * MiB);
    const l1 = await a.store.copyToLayer(disk.id, 'snp_bench_1');
    for (let i = 0; i < samples; i++) {
      let exportMs = 0;
      const t0 = process.hrtime.bigint();
      const moved = await move(a, b, l1.id, 'snp_bench_1', { onProgress: (p) => (p.done === 0 && !exportMs ? (exportMs = ms(t0)) : undefined) });
      const total = ms(t0);
      if (moved.status !== 200) throw new Error(`transfer: ${moved.status} ${JSON.stringify(moved.answer)}`);
      line(`transfer 1 GiB layer (sample ${i + 1})`, `${(total / 1000).toFixed(2)} s total: export (send+spool+hash) ${(exportMs / 1000).toFixed(2)} s, HTTP+receive+check ${((total - exportMs) / 1000).toFixed(2)} s, ${(moved.sent / MiB / (total / 1000)).toFixed(0)} MiB/s, ${moved.sent} bytes`);
      await b.store.unpin(l1.id, 'snp_bench_1');
    }
    await move(a, b, l1.id, 'snp_bench_1');
    writeRandom(path.join(diff, 'ten-mib.bin'), 10 * MiB);
    const l2 = await a.store.copyToLayer(disk.id, 'snp_bench_2');
    const t0 = process.hrtime.bigint();
    const delta = await move(a, b, l2.id, 'snp_bench_2');
    line('transfer: next live capture (+10 MiB), delta', `${(ms(t0) / 1000).toFixed(2)} s, ${delta.sent} bytes (against ${delta.header.frames[0]?.deltaFrom ?? 'nothing'})`);
  } finally {
    for (const fn of teardowns.reverse()) await fn();
  }
}

/**
 * Substrate benchmarks (the substrate part of `npm run bench`): for each substrate, create → agent ready →
 * display up (p50 of several), stop, start, capture at 10 MB and 1 GB written, fork → ready.
 * Call `benchSubstrates({ repoRoot })` (or one of the two) from the bench entry point; it prints as it goes.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { defaultImageCacheDir, ensureImage, type GuestImage } from '../../control-plane/src/substrate/image.js';
import type { Substrate } from '../../control-plane/src/substrate/substrate.js';
import { VmSubstrate } from '../../control-plane/src/substrate/vm/driver.js';
import { percentile } from './stats.js';

export interface SubstrateBenchOptions {
  repoRoot: string;
  cacheDir?: string;
  /** Samples for create → ready (container default 5, vm default 2: TCG boots take ~15 s). */
  samples?: number;
  print?: (line: string) => void;
  /** A prebuilt image to use instead of the recipe's (debugging). */
  image?: GuestImage;
}

type Resp = { status: number; body: Buffer };

/**
 * One HTTP/2 session per machine, reused: a VM's virtio-serial channel is one byte stream, and a reconnect
 * right after a close can read the previous session's frames.
 */
const sessions = new Map<string, http2.ClientHttp2Session>();

function sessionFor(sub: Substrate, id: string): http2.ClientHttp2Session {
  const cur = sessions.get(id);
  if (cur && !cur.closed && !cur.destroyed) return cur;
  const s = http2.connect('http://agent', { createConnection: () => net.connect(sub.channelPath(id)) });
  s.on('error', () => sessions.delete(id));
  s.on('close', () => sessions.get(id) === s && sessions.delete(id));
  sessions.set(id, s);
  return s;
}

function dropSession(id: string): void {
  sessions.get(id)?.destroy();
  sessions.delete(id);
}

function request(sub: Substrate, id: string, token: string, method: string, p: string, body?: unknown, timeoutMs = 10_000): Promise<Resp> {
  return new Promise((resolve, reject) => {
    const session = sessionFor(sub, id);
    const timer = setTimeout(() => {
      dropSession(id);
      reject(new Error('timeout'));
    }, timeoutMs);
    const h: http2.OutgoingHttpHeaders = { ':method': method, ':path': p, authorization: `Bearer ${token}` };
    if (body !== undefined) h['content-type'] = 'application/json';
    let req: http2.ClientHttp2Stream;
    try {
      req = session.request(h, { endStream: body === undefined });
    } catch (e) {
      clearTimeout(timer);
      dropSession(id);
      reject(e as Error);
      return;
    }
    const chunks: Buffer[] = [];
    let status = 0;
    req.on('response', (hs) => (status = Number(hs[':status'])));
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      clearTimeout(timer);
      resolve({ status, body: Buffer.concat(chunks) });
    });
    req.on('error', (e) => {
      clearTimeout(timer);
      dropSession(id);
      reject(e);
    });
    if (body !== undefined) req.end(JSON.stringify(body));
  });
}

async function until(fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      if (await fn()) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('timed out');
}

const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const f = (x: number) => `${x.toFixed(0)} ms`;

async function benchOne(
  name: string,
  sub: Substrate,
  res: { vcpu: number; memory_mb: number; disk_gb: number },
  samples: number,
  readyMs: number,
  print: (l: string) => void,
): Promise<void> {
  const token = crypto.randomBytes(24).toString('hex');
  const ready = (id: string) => until(async () => (await request(sub, id, token, 'GET', '/health', undefined, 3000)).status === 200, readyMs);
  const display = (id: string) => until(async () => (await request(sub, id, token, 'GET', '/screenshot?format=jpeg')).status === 200, readyMs);
  const exec = async (id: string, command: string[]) => {
    const r = await request(sub, id, token, 'POST', '/exec', { command, timeout_ms: 600_000 }, 600_000);
    if (r.status !== 200) throw new Error(`exec ${r.status}`);
  };
  const toReady: number[] = [];
  const toDisplay: number[] = [];
  const ids: string[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const id = `bench_${name}_${i}`;
      ids.push(id);
      const t0 = process.hrtime.bigint();
      await sub.create({ id, resources: res, source: { kind: 'base' }, token });
      await ready(id);
      toReady.push(ms(t0));
      await display(id);
      toDisplay.push(ms(t0));
      // Under TCG the host cannot hold many VMs: keep only the first.
      if (i > 0) {
        dropSession(id);
        await sub.destroy(id);
      }
    }
    toReady.sort((a, b) => a - b);
    toDisplay.sort((a, b) => a - b);
    print(`${name}: create → agent ready p50 ${f(percentile(toReady, 50))}, → display up p50 ${f(percentile(toDisplay, 50))} (n=${samples})`);
    const id = ids[0]!;
    dropSession(id);
    let t0 = process.hrtime.bigint();
    await sub.stop(id);
    print(`${name}: stop ${f(ms(t0))}`);
    t0 = process.hrtime.bigint();
    await sub.start(id);
    await ready(id);
    print(`${name}: start → agent ready ${f(ms(t0))}`);
    for (const [label, mb] of [
      ['10 MB', 10],
      ['1 GB', 1024],
    ] as const) {
      await exec(id, ['sh', '-c', `dd if=/dev/urandom of=/home/agent/bench-${mb} bs=1M count=${mb} status=none && sync`]);
      t0 = process.hrtime.bigint();
      const cap = await sub.capture(id, `bench-${mb}`);
      print(`${name}: capture with ${label} written ${f(ms(t0))} (layer ${(cap.bytes / 1024 / 1024).toFixed(0)} MiB, live ${cap.live})`);
      if (mb === 10) {
        if (name === 'vm') {
          dropSession(id);
          await sub.stop(id);
        }
        const fid = `bench_${name}_fork`;
        ids.push(fid);
        t0 = process.hrtime.bigint();
        await sub.create({ id: fid, resources: res, source: { kind: 'layer', layerId: cap.layerId }, token });
        await ready(fid);
        print(`${name}: fork → agent ready ${f(ms(t0))}`);
        dropSession(fid);
        await sub.destroy(fid);
        if (name === 'vm') {
          await sub.start(id);
          await ready(id);
        }
      }
    }
  } finally {
    for (const id of ids) {
      dropSession(id);
      await sub.destroy(id).catch(() => {});
    }
  }
}

export async function benchContainer(opts: SubstrateBenchOptions): Promise<void> {
  const print = opts.print ?? ((l: string) => console.log(l));
  const image = opts.image ?? (await ensureImage({ repoRoot: opts.repoRoot, cacheDir: opts.cacheDir ?? defaultImageCacheDir(), artifacts: 'container', log: print }));
  const root = fs.mkdtempSync('/tmp/bench-ct-');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, warn: print });
  print(`container: disk mode ${sub.diskMode} (live captures ${sub.diskMode === 'snapshot' ? 'snapshot btrfs subvolumes' : 'copy files'})`);
  try {
    await benchOne('container', sub, { vcpu: 2, memory_mb: 4096, disk_gb: 10 }, opts.samples ?? 5, 60_000, print);
  } finally {
    await sub.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    if (sub.env.runDir) fs.rmSync(sub.env.runDir, { recursive: true, force: true });
  }
}

export async function benchVm(opts: SubstrateBenchOptions): Promise<void> {
  const print = opts.print ?? ((l: string) => console.log(l));
  const image = opts.image ?? (await ensureImage({ repoRoot: opts.repoRoot, cacheDir: opts.cacheDir ?? defaultImageCacheDir(), artifacts: 'all', log: print }));
  const root = fs.mkdtempSync('/tmp/bench-vm-');
  const sub = new VmSubstrate({ root, kernel: image.kernel, initrd: image.initrd, baseDisk: image.baseDisk, warn: print });
  try {
    print(`vm: accelerator ${sub.accel}`);
    await benchOne('vm', sub, { vcpu: 2, memory_mb: 2048, disk_gb: 6 }, opts.samples ?? 2, 300_000, print);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

export async function benchSubstrates(opts: SubstrateBenchOptions): Promise<void> {
  await benchContainer(opts);
  await benchVm(opts);
}

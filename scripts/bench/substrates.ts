/**
 * Substrate benchmarks (the substrate part of `npm run bench`): for each substrate, create → agent ready →
 * display up (p50 of several), stop, start, capture at 10 MB and 1 GB written, fork → ready.
 * Call `benchSubstrates({ repoRoot })` (or one of the two) from the bench entry point; it prints as it goes.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { AgentPool, type AgentRequest } from '../../control-plane/src/agent-client/pool.js';
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

/**
 * The agent reached the way the control plane reaches it: AgentPool keeps one HTTP/2 session per machine
 * (a VM's virtio-serial channel is one byte stream; a reconnect right after a close can read the previous
 * session's frames).
 */
function agentClient(sub: Substrate) {
  const pool = new AgentPool({ openChannel: (id) => sub.openChannel(id), issueEnrollment: (id) => sub.issueEnrollment(id), connectTimeoutMs: 3000 });
  return {
    async request(id: string, token: string, method: AgentRequest['method'], p: string, body?: unknown, timeoutMs = 10_000): Promise<number> {
      try {
        return (await pool.request(id, token, { method, path: p, body: body === undefined ? undefined : JSON.stringify(body), timeoutMs })).status;
      } catch (e) {
        pool.drop(id);
        throw e;
      }
    },
    drop: (id: string) => pool.drop(id),
    close: () => pool.close(),
  };
}

/** Poll `fn` until it answers true (a throw counts as not yet), or throw after `timeoutMs`. */
export async function until(fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
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
  /** Also measure create → display up with outbound networking (bridge + guard), this many samples. */
  outboundSamples = 0,
): Promise<void> {
  const token = crypto.randomBytes(24).toString('hex');
  const agent = agentClient(sub);
  const dropSession = agent.drop;
  const ready = (id: string) => until(async () => (await agent.request(id, token, 'GET', '/health', undefined, 3000)) === 200, readyMs);
  const display = (id: string) => until(async () => (await agent.request(id, token, 'GET', '/screenshot?format=jpeg')) === 200, readyMs);
  const exec = async (id: string, command: string[]) => {
    const status = await agent.request(id, token, 'POST', '/exec', { command, timeout_ms: 600_000 }, 600_000);
    if (status !== 200) throw new Error(`exec ${status}`);
  };
  const toReady: number[] = [];
  const toDisplay: number[] = [];
  const ids: string[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const id = `bench_${name}_${i}`;
      ids.push(id);
      const t0 = process.hrtime.bigint();
      await sub.create({ id, resources: res, source: { kind: 'base' } });
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
    if (outboundSamples > 0) {
      const out: number[] = [];
      for (let i = 0; i < outboundSamples; i++) {
        const id = `bench_${name}_net${i}`;
        ids.push(id);
        const t0 = process.hrtime.bigint();
        await sub.create({ id, resources: res, source: { kind: 'base' }, network: 'outbound' });
        await display(id);
        out.push(ms(t0));
        dropSession(id);
        await sub.destroy(id);
      }
      out.sort((a, b) => a - b);
      print(`${name}: create → display up with outbound networking p50 ${f(percentile(out, 50))} (n=${outboundSamples})`);
    }
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
        await sub.create({ id: fid, resources: res, source: { kind: 'layer', layerId: cap.layerId } });
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
    await agent.close();
  }
}

export async function benchContainer(opts: SubstrateBenchOptions): Promise<void> {
  const print = opts.print ?? ((l: string) => console.log(l));
  const image = opts.image ?? (await ensureImage({ repoRoot: opts.repoRoot, cacheDir: opts.cacheDir ?? defaultImageCacheDir(), artifacts: 'container', log: print }));
  const root = fs.mkdtempSync('/tmp/bench-ct-');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, warn: print });
  print(`container: disk mode ${sub.diskMode} (live captures ${sub.diskMode === 'snapshot' ? 'snapshot btrfs subvolumes' : 'copy files'})`);
  try {
    await benchOne('container', sub, { vcpu: 2, memory_mb: 4096, disk_gb: 10 }, opts.samples ?? 5, 60_000, print, 3);
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
    await sub.removeNetwork();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

export async function benchSubstrates(opts: SubstrateBenchOptions): Promise<void> {
  await benchContainer(opts);
  await benchVm(opts);
}

/**
 * Idle machine memory (the memory part of `npm run bench`, BENCH=memory): a container machine of the guest
 * image, left alone once its desktop is up, measured the way every machine figure is (the cgroup's usage less
 * inactive file cache, control-plane/src/substrate/container/memory.ts), then again after it served screenshots,
 * pointer and key input, a files read and an exec (what it keeps once it was used), with the per-process
 * breakdown (PSS, which splits shared pages among the processes that map them) and that use's screenshot and
 * input p50.
 *
 * BENCH_MEMORY_BASELINE=<image dir> (an older `<cache>/<hash>`) measures that image too, alternating
 * with the current one on the same host in the same run: before → after without the host's load in between.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { AgentPool } from '../../control-plane/src/agent-client/pool.js';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { defaultImageCacheDir, ensureImage } from '../../control-plane/src/substrate/image.js';
import { fmt, measure } from './stats.js';
import { until } from './substrates.js';

export interface MemoryBenchOptions {
  repoRoot: string;
  print?: (line: string) => void;
}

interface ProcMem {
  name: string;
  rssKiB: number;
  pssKiB: number;
  /** Of the PSS: private and shared anonymous memory, file mappings (code), tmpfs/shm (the frame buffer). */
  anonKiB: number;
  fileKiB: number;
  shmemKiB: number;
}

/** One process's resident and proportional set sizes, from the host's /proc (the guest's pids are the host's too). */
function procMem(pid: number): ProcMem | null {
  try {
    const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0);
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    // node's processes are told apart by their script (the agent, the files worker).
    const name = comm === 'node' || comm.startsWith('node') ? `node ${path.basename(argv.find((a) => a.endsWith('.js')) ?? '?')}` : comm;
    return { name, rssKiB: kib('Rss'), pssKiB: kib('Pss'), anonKiB: kib('Pss_Anon'), fileKiB: kib('Pss_File'), shmemKiB: kib('Pss_Shmem') };
  } catch {
    return null;
  }
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** The median of `n` reads a second apart of a machine's working set, with the last read's details. */
async function settledMemory(sub: ContainerSubstrate, id: string, n = 5) {
  const reads: NonNullable<ReturnType<ContainerSubstrate['memory']>>[] = [];
  for (let i = 0; i < n; i++) {
    const m = sub.memory(id);
    if (!m) throw new Error('machine memory cgroup unreadable (cgroup v1, cgroupfs layout expected)');
    reads.push(m);
    await sleep(1000);
  }
  const sorted = [...reads].sort((a, b) => a.workingSetBytes - b.workingSetBytes);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function breakdown(pids: number[]): string {
  const by = new Map<string, ProcMem & { n: number }>();
  for (const pid of pids) {
    const p = procMem(pid);
    if (!p) continue;
    const e = by.get(p.name) ?? { name: p.name, rssKiB: 0, pssKiB: 0, anonKiB: 0, fileKiB: 0, shmemKiB: 0, n: 0 };
    e.rssKiB += p.rssKiB;
    e.pssKiB += p.pssKiB;
    e.anonKiB += p.anonKiB;
    e.fileKiB += p.fileKiB;
    e.shmemKiB += p.shmemKiB;
    e.n++;
    by.set(p.name, e);
  }
  const rows = [...by.values()].sort((a, b) => b.pssKiB - a.pssKiB);
  const m = (kib: number) => (kib / 1024).toFixed(1);
  const sum = (k: 'pssKiB' | 'anonKiB') => rows.reduce((s, r) => s + r[k], 0);
  return [
    ...rows.map((r) => `    ${r.name}${r.n > 1 ? ` x${r.n}` : ''}: PSS ${m(r.pssKiB)} MiB = anon ${m(r.anonKiB)} + file ${m(r.fileKiB)} + shmem ${m(r.shmemKiB)} (RSS ${m(r.rssKiB)})`),
    `    sum of PSS ${m(sum('pssKiB'))} MiB, of which anon ${m(sum('anonKiB'))} MiB (file pages are shared with every machine of the image)`,
  ].join('\n');
}

export async function measureImage(label: string, rootfs: string, print: (l: string) => void): Promise<void> {
  const root = fs.mkdtempSync('/tmp/bench-mem-');
  const sub = new ContainerSubstrate({ root, baseRootfs: rootfs, stopTimeoutMs: 5000, warn: print });
  const pool = new AgentPool({ openChannel: (id) => sub.openChannel(id), issueEnrollment: (id) => sub.issueEnrollment(id), connectTimeoutMs: 3000 });
  const token = crypto.randomBytes(24).toString('hex');
  const id = `bench_mem_${crypto.randomBytes(3).toString('hex')}`;
  const call = async (method: 'GET' | 'POST', p: string, body?: unknown) => {
    const r = await pool.request(id, token, { method, path: p, body: body === undefined ? undefined : JSON.stringify(body), timeoutMs: 10_000 });
    if (r.status !== 200) throw new Error(`${method} ${p}: ${r.status}`);
    return r;
  };
  try {
    await sub.create({ id, resources: { vcpu: 2, memory_mb: 4096, disk_gb: 10 }, source: { kind: 'base' } });
    await until(async () => (await call('GET', '/screenshot?format=jpeg')).status === 200, 60_000);
    // Idle: nothing asked of it after the first screenshot; the agent's start-up work (encoder preload, first
    // capture) is over well within this.
    await sleep(10_000);
    const idle = await settledMemory(sub, id);
    print(`memory [${label}]: idle machine ${mib(idle.workingSetBytes)} (cgroup usage ${mib(idle.usageBytes)} less inactive file ${mib(idle.inactiveFileBytes)}; anon ${mib(idle.anonBytes)}, shmem ${mib(idle.shmemBytes)}, kernel ${idle.kernelBytes === null ? 'not counted' : mib(idle.kernelBytes)})`);
    print(breakdown(idle.pids));
    const shot = await measure(100, () => call('GET', '/screenshot?format=jpeg'));
    const move = await measure(50, (i) => call('POST', '/mouse/move', { x: 100 + (i % 50), y: 100 }));
    const key = await measure(50, () => call('POST', '/keyboard/key', { key: 'shift' }));
    await call('GET', '/files?path=%2Fhome%2Fagent');
    await call('POST', '/exec', { command: ['true'] });
    print(`memory [${label}]: screenshot jpeg ${fmt(shot)}; pointer move ${fmt(move)}; key ${fmt(key)}`);
    await sleep(5_000);
    const used = await settledMemory(sub, id);
    print(`memory [${label}]: idle after that use ${mib(used.workingSetBytes)} (usage ${mib(used.usageBytes)}, inactive file ${mib(used.inactiveFileBytes)}; anon ${mib(used.anonBytes)}, shmem ${mib(used.shmemBytes)}, kernel ${used.kernelBytes === null ? 'not counted' : mib(used.kernelBytes)})`);
    print(breakdown(used.pids));
  } finally {
    pool.drop(id);
    await pool.close();
    await sub.destroy(id).catch(() => {});
    await sub.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    if (sub.env.runDir) fs.rmSync(sub.env.runDir, { recursive: true, force: true });
  }
}

export async function benchMemory(opts: MemoryBenchOptions): Promise<void> {
  const print = opts.print ?? ((l: string) => console.log(l));
  const image = await ensureImage({ repoRoot: opts.repoRoot, cacheDir: defaultImageCacheDir(), artifacts: 'container', log: print });
  const baseline = process.env.BENCH_MEMORY_BASELINE;
  const images: Array<[string, string]> = [[`image ${image.hash}`, image.rootfs]];
  if (baseline) images.unshift([`baseline ${path.basename(baseline)}`, path.join(baseline, 'rootfs')]);
  // Alternate twice when there is a baseline, so neither image always runs on the quieter host.
  const order = baseline ? [...images, ...images.slice().reverse()] : images;
  for (const [label, rootfs] of order) await measureImage(label, rootfs, print);
}

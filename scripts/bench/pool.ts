/**
 * Warm pool benchmark (the `pool` part of `npm run bench`; issue 26 item 1), through /v1 on the container
 * substrate, one control plane with WARM_POOL_PER_SIZE=1: create → display up cold (the pool drained first, so
 * nothing else boots meanwhile) and warm (a ready member taken), alternated in the same run, and the idle cost
 * of a pool member: its container's cgroup memory less inactive file cache. Target: warm ≤ 0.2x cold.
 * Run alone: `BENCH=pool npm run bench`.
 */
import fs from 'node:fs';
import { findRepoRoot } from '../../control-plane/src/machine-host.js';
import type { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { benchClient, containerHost, serveForBench, type BenchCall } from './api.js';
import { line, percentile } from './stats.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A member's cgroup memory less inactive file cache: the substrate's one measure (container/memory.ts). */
function idleBytes(sub: ContainerSubstrate, id: string): number {
  const m = sub.memory(id);
  if (!m) throw new Error(`no memory cgroup for pool member ${id}`);
  return m.workingSetBytes;
}

async function toDisplayUp(call: BenchCall, key: string): Promise<{ id: string; ms: number }> {
  const t0 = performance.now();
  const m = await call('POST', '/v1/machines', { key, body: {} });
  if (m.status !== 201) throw new Error(`create ${m.status} ${JSON.stringify(m.json)}`);
  for (;;) {
    const d = await call('GET', `/v1/machines/${m.json.id}/display`, { key });
    if (d.status === 200 && d.json.up) break;
    await sleep(20);
  }
  return { id: m.json.id as string, ms: performance.now() - t0 };
}

export async function benchPool(o: { repoRoot?: string; samples?: number } = {}): Promise<void> {
  const samples = o.samples ?? 3;
  const host = await containerHost(o.repoRoot ?? findRepoRoot());
  const { running, dataDir } = await serveForBench(host.substrate, { WARM_POOL_PER_SIZE: '1' });
  const pool = running.services.machines.warmPool;
  const client = await benchClient(running.url);
  const { call, key } = client;
  try {
    console.log('# warm pool: create → display up through /v1, cold and warm alternated (container substrate)');
    const cold: number[] = [];
    const warm: number[] = [];
    const idle: number[] = [];
    for (let i = 0; i < samples; i++) {
      // Cold: no member, nothing booting beside it.
      await pool.drain();
      const c = await toDisplayUp(call, key);
      cold.push(c.ms);
      await call('DELETE', `/v1/machines/${c.id}`, { key });
      // Warm: the pool fills for the demand the cold create made; its member is taken once it listens and
      // has idled a few seconds (the idle figure is read then).
      pool.start();
      for (let n = 0; !pool.ready().small?.length; n++) {
        if (n === 5) throw new Error('the pool did not fill');
        await pool.tick();
      }
      await sleep(5000);
      const member = pool.ready().small![0]!;
      idle.push(idleBytes(host.substrate, member));
      const w = await toDisplayUp(call, key);
      if (w.id !== member) throw new Error('the warm create did not take the pool member');
      warm.push(w.ms);
      await call('DELETE', `/v1/machines/${w.id}`, { key });
    }
    for (const xs of [cold, warm, idle]) xs.sort((a, b) => a - b);
    const c50 = percentile(cold, 50);
    const w50 = percentile(warm, 50);
    line('create → display up, cold (no pool)', `p50 ${c50.toFixed(0)} ms  (n=${samples})`);
    line('create → display up, warm (from the pool)', `p50 ${w50.toFixed(0)} ms  = ${(w50 / c50).toFixed(2)}x cold (target ≤ 0.2x)  (n=${samples})`);
    line('idle pool member, cgroup memory less inactive file', `p50 ${(percentile(idle, 50) / 1024 / 1024).toFixed(0)} MiB per member  (n=${samples})`);
  } finally {
    await pool.drain();
    await client.close();
    await running.close();
    await host.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Placement time (the `placement` part of `npm run bench`; issue 25 item 2, docs/scale.md "Placement"): on a
 * throwaway PostgreSQL (scripts/lib/throwaway-postgres.ts), with 3 and then 30 registered hosts holding 10 machines
 * each, one create's placement as it runs in the deployment: `placeFor` (one read of every host with its placed
 * usage, ranked) then the admitting transaction on the chosen host (its row locked FOR UPDATE, the fit re-checked,
 * the machine recorded). p50/p99 of each half and of the whole, one placement at a time.
 * Run alone: `node dist/scripts/bench/placement.js`.
 */
import { pathToFileURL } from 'node:url';
import { placeFor, roomOnHost } from '../../control-plane/src/services/placement.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import { hostsRepo } from '../../control-plane/src/store/repos/hosts.js';
import { createStore } from '../../control-plane/src/store/store.js';
import { machineRow, seedOrg } from '../../test/helpers/store-engines.js';
import { startPostgres } from '../lib/throwaway-postgres.js';
import { fmt, line, percentile } from './stats.js';

const N = 300;
const WARMUP = 20;
const PER_HOST = 10;
const GIB = 1024 * 1024 * 1024;
/** Room for every machine the bench records: 64 cores, 1 TiB of memory, 100 TiB of disk. */
const CAPACITY = { cores: 64, memory_bytes: 1024 * GIB, disk_bytes: 100 * 1024 * GIB, machines: { small: 230, standard: 115, large: 57 } };

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), mean: s.reduce((a, b) => a + b, 0) / s.length };
};

async function measure(url: string, hostCount: number): Promise<void> {
  const db = await openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
  const store = createStore(db);
  try {
    await seedOrg(store);
    const hosts = hostsRepo(db);
    let n = 0;
    const id = () => `mch_${String(++n).padStart(24, '0')}`;
    for (let h = 0; h < hostCount; h++) {
      const hostId = `host_${String(h).padStart(24, '0')}`;
      await hosts.takeOver({ id: hostId, region: 'default', capacity: CAPACITY, internalUrl: null });
      for (let i = 0; i < PER_HOST; i++) await store.machines.insert(machineRow(id(), { host_id: hostId, name: `m${n}` }));
    }
    const rank: number[] = [];
    const admit: number[] = [];
    const whole: number[] = [];
    for (let i = 0; i < N + WARMUP; i++) {
      const t0 = performance.now();
      const p = await placeFor(store, { size: 'small', region: null });
      if (p.kind !== 'hosts') throw new Error(`placement: ${p.kind}`);
      const t1 = performance.now();
      const hostId = p.ranked[0]!;
      await store.db.tx(async () => {
        if (!(await roomOnHost(store, hostId, { kind: 'new', size: 'small', start: true, region: null }, { now: new Date() }))) throw new Error('unregistered');
        const m = id();
        await store.machines.insert(machineRow(m, { host_id: hostId, name: `m${n}` }));
      });
      const t2 = performance.now();
      if (i >= WARMUP) {
        rank.push(t1 - t0);
        admit.push(t2 - t1);
        whole.push(t2 - t0);
      }
    }
    line(`${hostCount} hosts: placeFor (read + rank)`, fmt(stats(rank)));
    line(`${hostCount} hosts: admission (lock host, re-check, record)`, fmt(stats(admit)));
    line(`${hostCount} hosts: placement, whole`, fmt(stats(whole)));
  } finally {
    await db.close();
  }
}

export async function benchPlacement(): Promise<void> {
  console.log('\n== placement on PostgreSQL (placeFor, then the locked admission on the chosen host; one at a time) ==');
  const cluster = await startPostgres();
  try {
    for (const hostCount of [3, 30]) await measure(await cluster.createDatabase(`placement_${hostCount}`), hostCount);
  } finally {
    await cluster.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchPlacement();

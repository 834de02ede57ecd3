/**
 * The live events channel across two control-plane processes on one PostgreSQL (the `events` part of
 * `npm run bench`; issue 24 item 3, control-plane/src/cluster/events-feed.ts): on a throwaway cluster
 * (scripts/lib/throwaway-postgres.ts), process A (events-writer.ts, a child) records one machine event at a time through the
 * event service; this process, B, runs the events feed (LISTEN/NOTIFY) and a subscriber of that machine through
 * its event service, as the gateway's events channel does. Latency: the wall-clock time A took just before
 * recording (carried in the event) → the subscriber's delivery on B; p50/p99 (target p50 ≤ 50 ms). One event in
 * flight at a time, so the figure is the channel's, not a queue's.
 * Run alone: `node dist/scripts/bench/events.js`.
 */
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startEventsFeed } from '../../control-plane/src/cluster/events-feed.js';
import { createEventService } from '../../control-plane/src/services/events.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import { createStore } from '../../control-plane/src/store/store.js';
import { startPostgres } from '../lib/throwaway-postgres.js';
import { machineRow, seedOrg } from '../../test/helpers/store-engines.js';
import { fmt, line, percentile } from './stats.js';

const N = 500;
const WARMUP = 20;

export async function benchEvents(): Promise<void> {
  console.log('\n== events channel across two control-plane processes on PostgreSQL (record on A → delivered on B) ==');
  const cluster = await startPostgres();
  const db = await openStoreDb({ databaseUrl: cluster.url, dataDir: '/nonexistent' });
  const store = createStore(db);
  await seedOrg(store);
  await store.machines.insert(machineRow('mch_bench'));
  const events = createEventService({ store, now: () => new Date() });
  const feed = await startEventsFeed({ databaseUrl: cluster.url, store, events, log: () => undefined });
  const writer = spawn(process.execPath, [fileURLToPath(new URL('./events-writer.js', import.meta.url)), cluster.url], { stdio: ['pipe', 'pipe', 'inherit'] });
  const fromA = readline.createInterface({ input: writer.stdout! });
  let delivered: ((ms: number) => void) | null = null;
  const unsubscribe = events.subscribe('mch_bench', await events.headCursor('mch_bench'), (d) => {
    const sent = Number(d.event.data.t);
    delivered?.(performance.timeOrigin + performance.now() - sent);
  });
  try {
    await new Promise<void>((resolve) => fromA.once('line', () => resolve()));
    const xs: number[] = [];
    for (let i = 0; i < N + WARMUP; i++) {
      const ms = await new Promise<number>((resolve) => {
        delivered = resolve;
        writer.stdin!.write(`${i}\n`);
      });
      if (i >= WARMUP) xs.push(ms);
    }
    xs.sort((a, b) => a - b);
    const s = { n: N, p50: percentile(xs, 50), p99: percentile(xs, 99), mean: xs.reduce((a, b) => a + b, 0) / N };
    line('event recorded on A → delivered on B', `${fmt(s)}  (target p50 ≤ 50 ms)`);
  } finally {
    unsubscribe();
    writer.stdin!.end();
    await new Promise((r) => writer.once('exit', r));
    await feed.stop();
    await db.close();
    await cluster.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchEvents();

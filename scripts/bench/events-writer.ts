/**
 * Process A of the `events` bench (scripts/bench/events.ts): a control plane's event service on the PostgreSQL
 * named by argv[2]. For each line `n` on stdin it records one event of machine `mch_bench` in a transaction
 * (services/events.ts `append` → eventsRepo.insert → cluster/notify.ts), its data carrying the wall-clock time in
 * ms (performance.timeOrigin-based, sub-ms) taken just before; prints `n` once committed. Exits when stdin closes.
 */
import readline from 'node:readline';
import { createEventService } from '../../control-plane/src/services/events.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import { createStore } from '../../control-plane/src/store/store.js';

const db = await openStoreDb({ databaseUrl: process.argv[2]!, dataDir: '/nonexistent' });
const store = createStore(db);
const events = createEventService({ store, now: () => new Date() });
const lines = readline.createInterface({ input: process.stdin });
lines.on('close', () => void db.close().then(() => process.exit(0)));
let queue = Promise.resolve();
lines.on('line', (n) => {
  queue = queue.then(async () => {
    const t = performance.timeOrigin + performance.now();
    await store.db.tx(() => events.append('org_a', 'mch_bench', 'machine.updated', { n: Number(n), t }));
    process.stdout.write(`${n}\n`);
  });
});
process.stdout.write('ready\n');

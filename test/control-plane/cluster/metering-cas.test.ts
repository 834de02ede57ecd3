/**
 * Metering is idempotent across processes (issue 24 item 2): two metering services, each on its own connection pool
 * to one real PostgreSQL (as two control planes are), flush the same machines at the same time. Their transactions
 * are made to overlap for certain, not by luck: a third session holds usage_records locked until both flushes are
 * inside their transactions and waiting on a lock (seen in pg_stat_activity). Each second is recorded once: the
 * cursor's advance is a compare-and-set (store/repos/usage.ts advanceCursor), so the flush that loses it records
 * nothing for that interval. A later flush from the other process records exactly what follows: nothing lost.
 * Without the compare-and-set (the cursor read, then written) both flushes counted [T0, T0+90s]: 180 seconds.
 */
import pg from 'pg';
import t from 'tap';
import { createMeteringService } from '../../../control-plane/src/services/metering.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { createStore, type Store } from '../../../control-plane/src/store/store.js';
import { machineRow, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);
const SMALL_DISK = 10737418240n; // 10 GiB

async function usage(store: Store): Promise<string[]> {
  const rows = await store.db.q().selectFrom('usage_records').select((eb) => ['source_id', 'meter', 'hour', eb.cast<string>('quantity', 'text').as('quantity')])
    .orderBy('source_id').orderBy('meter').execute();
  return rows.map((r) => `${r.source_id} ${r.meter} ${r.hour} ${r.quantity}`);
}

t.test('two processes flushing the same machines at once count each second once', async (t) => {
  const url = await (await rig.postgres()).createDatabase('metering_cas');
  const open = async () => {
    const db = await openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
    t.teardown(() => db.close());
    return createStore(db);
  };
  const a = await open();
  const b = await open();
  await seedOrg(a);
  await a.machines.insert(machineRow('mch_1'));
  await a.machines.insert(machineRow('mch_2'));
  let nowMs = Date.parse(T0) + 90_000;
  const now = () => new Date(nowMs);
  const meterA = createMeteringService({ store: a, now });
  const meterB = createMeteringService({ store: b, now });

  const blocker = new pg.Client({ connectionString: url });
  await blocker.connect();
  t.teardown(() => blocker.end());
  await blocker.query('BEGIN');
  await blocker.query('LOCK TABLE usage_records IN EXCLUSIVE MODE');
  const flushes = Promise.all([meterA.flush(), meterB.flush()]);
  // Both flushes inside their transactions, each waiting on a lock (the table, or the other's cursor rows).
  for (;;) {
    const { rows } = await blocker.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
    );
    if (rows[0]!.n >= 2) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await blocker.query('COMMIT');
  await flushes;

  const hour = '2026-01-01T00:00:00.000Z';
  t.strictSame(await usage(a), [
    `mch_1 compute_small_seconds ${hour} 90`,
    `mch_1 hot_storage_byte_seconds ${hour} ${90n * SMALL_DISK}`,
    `mch_2 compute_small_seconds ${hour} 90`,
    `mch_2 hot_storage_byte_seconds ${hour} ${90n * SMALL_DISK}`,
  ], '90 seconds each, not 180');

  // The other process flushes next: exactly the 30 seconds since, nothing lost, nothing again.
  nowMs += 30_000;
  await meterB.flush();
  await meterA.flush();
  t.strictSame(await usage(b), [
    `mch_1 compute_small_seconds ${hour} 120`,
    `mch_1 hot_storage_byte_seconds ${hour} ${120n * SMALL_DISK}`,
    `mch_2 compute_small_seconds ${hour} 120`,
    `mch_2 hot_storage_byte_seconds ${hour} ${120n * SMALL_DISK}`,
  ]);
});

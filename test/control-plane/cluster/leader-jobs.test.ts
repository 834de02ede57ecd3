/**
 * The deployment's jobs with two real control planes (main.ts serve) on one real PostgreSQL (issue 24 item 3): only
 * the leader sweeps sessions (a session idles once, expires once, one event) and meters intervals; kill -9 of the
 * leader hands the jobs to the other, which records exactly what followed the dead leader's last flush.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { createStore } from '../../../control-plane/src/store/store.js';
import { childGroup } from '../../helpers/pg-processes.js';
import { machineRow, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);
const SMALL_DISK = 10737418240n;
const MIN = 60_000;

t.test('two control planes: the leader alone sweeps and meters; after kill -9 the other does, nothing twice', async (t) => {
  const url = await (await rig.postgres()).createDatabase('leader_jobs');
  const db = await openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  const store = createStore(db);
  await seedOrg(store);
  await store.machines.insert(machineRow('mch_1'));
  await store.sessions.insert({ id: 'ses_1', org_id: 'org_a', machine_id: 'mch_1', type: 'agent', state: 'active', opener_kind: 'user', opener_id: 'usr_a', created_at: T0, closed_at: null });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-leader-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const start = childGroup(t, { mode: 'serve-jobs', url, t0: Date.parse(T0), periodMs: 150 });
  const usage = async () =>
    (await db.q().selectFrom('usage_records').select((eb) => ['meter', 'hour', eb.cast<string>('quantity', 'text').as('quantity')]).orderBy('hour').orderBy('meter').execute())
      .map((r) => `${r.meter} ${r.hour} ${r.quantity}`);
  const untilUsage = async (want: string[]) => {
    // Waits for the flush that reaches `want` (a count past it fails the equality below).
    for (;;) {
      const got = await usage();
      if (got.length >= want.length && got.join() >= want.join()) return got;
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const a = start('a', { dataDir: path.join(dir, 'a') });
  await a.next((l) => l.state === 'leading');
  const b = start('b', { dataDir: path.join(dir, 'b') });
  await b.next((l) => l.state === 'following');

  for (const c of [a, b]) c.send({ op: 'clock', t: Date.parse(T0) + 6 * MIN });
  await a.next((l) => Array.isArray(l.idled) && (l.idled as string[]).includes('ses_1'));
  const h0 = '2026-01-01T00:00:00.000Z';
  t.strictSame(await untilUsage([`compute_small_seconds ${h0} 360`, `hot_storage_byte_seconds ${h0} ${360n * SMALL_DISK}`]),
    [`compute_small_seconds ${h0} 360`, `hot_storage_byte_seconds ${h0} ${360n * SMALL_DISK}`], 'the leader metered 6 minutes');
  t.notOk(b.lines.some((l) => l.sweep), 'the follower never sweeps');

  await a.kill9();
  await b.next((l) => l.state === 'leading');
  b.send({ op: 'clock', t: Date.parse(T0) + 61 * MIN });
  await b.next((l) => Array.isArray(l.expired) && (l.expired as string[]).includes('ses_1'));
  const h1 = '2026-01-01T01:00:00.000Z';
  const want = [
    `compute_small_seconds ${h0} 3600`, `hot_storage_byte_seconds ${h0} ${3600n * SMALL_DISK}`,
    `compute_small_seconds ${h1} 60`, `hot_storage_byte_seconds ${h1} ${60n * SMALL_DISK}`,
  ];
  t.strictSame(await untilUsage(want), want, 'the new leader metered from the dead one\'s cursor: 61 minutes, once');
  const since = b.lines.length;
  await b.next((l) => l.flushed === true, since);
  await b.next((l) => l.flushed === true);
  t.strictSame(await usage(), want, 'later flushes add nothing');
  const events = await db.q().selectFrom('machine_events').select(['type', 'data']).where('type', 'like', 'session.%').execute();
  t.equal(events.filter((e) => e.type === 'session.disconnected').length, 1, 'one expiry event');
  t.equal((await store.sessions.byId('ses_1'))?.state, 'closed');
  await b.stop();
});

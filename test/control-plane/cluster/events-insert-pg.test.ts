/**
 * The store's event insert on PostgreSQL (issue 24 item 3): every `store.events.insert` takes the events advisory
 * lock for its transaction (so seqs commit in order deployment-wide) and notifies the `computer_events` channel at
 * its commit — in the caller's transaction, or one of its own when called outside one; a rolled-back insert wakes
 * nobody. A real LISTEN connection on a real throwaway cluster observes it.
 */
import pg from 'pg';
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { createStore } from '../../../control-plane/src/store/store.js';
import { machineRow, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);

t.test('events.insert on PostgreSQL: advisory lock held to commit, NOTIFY at commit, none on rollback', async (t) => {
  const url = await (await rig.postgres()).createDatabase('events_insert');
  const db = await openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  const store = createStore(db);
  await seedOrg(store);
  await store.machines.insert(machineRow('mch_1'));
  const event = (n: number) => ({ id: `evt_${n}`, org_id: 'org_a', machine_id: 'mch_1', type: 'machine.state', data: '{}', created_at: T0 });

  const listener = new pg.Client({ connectionString: url });
  await listener.connect();
  t.teardown(() => listener.end());
  const payloads: string[] = [];
  let arrived: () => void = () => undefined;
  listener.on('notification', (n) => {
    if (n.channel === 'computer_events') payloads.push(n.payload ?? '');
    arrived();
  });
  await listener.query('LISTEN computer_events');
  const nth = (k: number) =>
    new Promise<void>((resolve) => {
      arrived = () => payloads.length >= k && resolve();
      arrived();
    });

  // Outside a transaction: one of its own.
  t.equal(await store.events.insert(event(1)), 1);
  await nth(1);
  t.same(payloads, ['1'], 'notified with the seq');

  // Inside the caller's transaction: the lock is held, and the notification waits, until it commits.
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.teardown(() => admin.end());
  const heldLocks = async () =>
    Number((await admin.query(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = 1667593844 AND granted`)).rows[0].n);
  await store.db.tx(async () => {
    t.equal(await store.events.insert(event(2)), 2);
    t.equal(await heldLocks(), 1, 'the events write lock is held by the open transaction');
    t.same(payloads, ['1'], 'no notification before the commit');
  });
  await nth(2);
  t.same(payloads, ['1', '2']);
  t.equal(await heldLocks(), 0, 'released at commit');

  // A rollback notifies nobody: the next commit's notification follows '2' directly.
  await t.rejects(
    store.db.tx(async () => {
      await store.events.insert(event(3));
      throw new Error('undone');
    }),
    /undone/,
  );
  t.equal(await store.events.insert(event(4)), 4);
  await nth(3);
  t.same(payloads, ['1', '2', '4']);
});

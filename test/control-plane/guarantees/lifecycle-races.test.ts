/**
 * Conflicting lifecycle calls across processes (issue 24 item 2: "exactly one winner in concurrent conflicting
 * lifecycle calls"): calls on one machine, split over two real `serve()` processes on one PostgreSQL and one
 * DATA_DIR (the non-driver forwards them to the driver), their state writes held (helpers/pg-hold.ts) until every
 * call waits on a lock, so each has read the same state before any could write. Exactly one wins; every other gets
 * the 409 naming the state it found; the machine's event log records the transition once. On SQLite, one process.
 */
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { race, startServed, type Engine, type HttpReply } from '../../helpers/served-processes.js';

const statuses = (rs: HttpReply[]) => rs.map((r) => r.status).sort((a, b) => a - b);

for (const engine of ['postgres', 'sqlite'] as Engine[]) {
  t.test(`${engine}: conflicting lifecycle calls on one machine have one winner`, async (t) => {
    const s = await startServed(t, engine);
    const { key } = await s.tenant('pro');
    const made = await s.call(s.base(0), 'POST', '/v1/machines', { key, body: { name: 'contested' } });
    t.equal(made.status, 201, JSON.stringify(made.json));
    const id = String(made.json.id);

    await t.test('six stops of a running machine', async (t) => {
      const replies = await race(s, 'machines', 6, (b) => s.call(b, 'POST', `/v1/machines/${id}/stop`, { key }));
      t.same(statuses(replies), [200, 409, 409, 409, 409, 409], JSON.stringify(replies.map((r) => r.json)));
      t.equal(replies.find((r) => r.status === 200)!.json.state, 'stopped');
      for (const r of replies.filter((r) => r.status === 409)) {
        t.equal(r.json.error.code, 'conflict');
        t.match(r.json.error.message, /^Cannot stop a machine that is (stopping|stopped); it must be running\.$/);
      }
    });

    await t.test('four deletes of the stopped machine', async (t) => {
      const replies = await race(s, 'machines', 4, (b) => s.call(b, 'DELETE', `/v1/machines/${id}`, { key }));
      const codes = statuses(replies);
      t.equal(codes.filter((c) => c === 204).length, 1, `one delete wins: ${JSON.stringify(replies.map((r) => r.json))}`);
      t.same(codes.filter((c) => c !== 204).map((c) => (c === 404 || c === 409 ? 'refused' : c)), ['refused', 'refused', 'refused'], 'the others find it deleting (409) or gone (404)');
      const gone = await s.call(s.base(1), 'GET', `/v1/machines/${id}`, { key });
      t.equal(gone.status, 404);
    });

    if (s.url) {
      const db = await openStoreDb({ databaseUrl: s.url, dataDir: '/nonexistent' });
      t.teardown(() => db.close());
      const types = (await db.q().selectFrom('machine_events').select(['type']).where('machine_id', '=', id).orderBy('seq').execute()).map((e) => e.type);
      t.same(types.filter((x) => x === 'machine.stopped' || x === 'machine.deleted'), ['machine.stopped', 'machine.deleted'], 'each transition recorded once');
    }
  });
}

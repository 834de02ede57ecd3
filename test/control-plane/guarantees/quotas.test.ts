/**
 * Quotas exact under concurrency (issue 24 item 2), on both engines: on PostgreSQL with two real control-plane
 * processes on one database, the concurrent calls split between them; on SQLite in one process. Every counting
 * transaction takes the organization's row lock first (services/quotas.ts), so no two can count the same room.
 *
 * On PostgreSQL the race is made certain (helpers/pg-hold.ts): the test holds the inserts of the counted table until
 * all 8 transactions wait on a lock, so without the row lock all 8 would have counted the same number.
 */
import t from 'tap';
import { race, startServed, type Engine, type HttpReply } from '../../helpers/served-processes.js';

const statuses = (rs: HttpReply[]) => rs.map((r) => r.status).sort((a, b) => a - b);

for (const engine of ['postgres', 'sqlite'] as Engine[]) {
  t.test(`${engine}: quotas hold under concurrent creates`, async (t) => {
    const s = await startServed(t, engine);
    // The developer plan: 5 machines, 10 snapshots per machine, 10 concurrent sessions.
    const { key } = await s.tenant('developer');
    const first = await s.call(s.base(0), 'POST', '/v1/machines', { key, body: { start: false } });
    t.equal(first.status, 201, JSON.stringify(first.json));

    await t.test('8 concurrent creates on a 4-machine allowance: exactly 4', async (t) => {
      const replies = await race(s, 'machines', 8, (b, i) => s.call(b, 'POST', '/v1/machines', { key, body: { name: `race-${i}`, start: false } }));
      t.same(statuses(replies), [201, 201, 201, 201, 402, 402, 402, 402], JSON.stringify(replies.map((r) => r.json)));
      for (const r of replies.filter((r) => r.status === 402)) {
        t.equal(r.json.error.code, 'quota_exceeded');
        t.equal(r.json.error.quota.limit, 'machines');
        t.equal(r.json.error.quota.maximum, 5);
        t.equal(r.json.error.quota.current, 5);
      }
      const list = await s.call(s.base(1), 'GET', '/v1/machines?limit=100', { key });
      t.equal(list.json.data.length, 5);
    });

    await t.test('12 concurrent session opens on a 10-session allowance: exactly 10', async (t) => {
      const replies = await race(s, 'sessions', 12, (b) => s.call(b, 'POST', '/v1/sessions', { key, body: { machine_id: first.json.id, type: 'agent' } }));
      t.same(statuses(replies), [...Array<number>(10).fill(201), 402, 402], JSON.stringify(replies.map((r) => r.json)));
      for (const r of replies.filter((r) => r.status === 402)) {
        t.equal(r.json.error.quota.limit, 'concurrent_sessions');
        t.equal(r.json.error.quota.maximum, 10);
      }
    });
  });
}

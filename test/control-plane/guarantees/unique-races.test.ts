/**
 * Unique-constraint races (issue 24 item 2): a check-then-write whose check passes in two processes at once ends in
 * the unique index refusing the second write (PostgreSQL 23505). That must reach the caller as the check's own
 * conflict, never a 500: exactly one succeeds. On PostgreSQL with two real processes, the race made certain by
 * holding the table's writes (helpers/pg-hold.ts); on SQLite in one process (the check itself refuses).
 */
import t from 'tap';
import { race, startServed, type Engine, type HttpReply } from '../../helpers/served-processes.js';

const statuses = (rs: HttpReply[]) => rs.map((r) => r.status).sort((a, b) => a - b);

for (const engine of ['postgres', 'sqlite'] as Engine[]) {
  t.test(`${engine}: unique races end in one winner and the check's conflict`, async (t) => {
    const s = await startServed(t, engine);

    await t.test('two signups with one e-mail address', async (t) => {
      const email = `same-${engine}@example.com`;
      const replies = await race(s, 'users', 2, (b, i) =>
        s.call(b, 'POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery' }, ip: `198.51.100.${i + 1}` }));
      t.same(statuses(replies), [201, 409], JSON.stringify(replies.map((r) => r.json)));
      const loser = replies.find((r) => r.status === 409)!;
      t.equal(loser.json.error.code, 'conflict');
      t.equal(loser.json.error.message, 'An account with this e-mail address already exists.');
    });

    const { key } = await s.tenant('pro');
    await t.test('two creates with one machine name', async (t) => {
      const replies = await race(s, 'machines', 2, (b) => s.call(b, 'POST', '/v1/machines', { key, body: { name: 'twin', start: false } }));
      t.same(statuses(replies), [201, 409], JSON.stringify(replies.map((r) => r.json)));
      t.equal(replies.find((r) => r.status === 409)!.json.error.message, 'A machine named twin already exists.');
    });

    await t.test('two renames to one machine name', async (t) => {
      const ids: string[] = [];
      for (const i of [0, 1]) ids.push((await s.call(s.base(i), 'POST', '/v1/machines', { key, body: { start: false } })).json.id);
      const replies = await race(s, 'machines', 2, (b, i) => s.call(b, 'PATCH', `/v1/machines/${ids[i]}`, { key, body: { name: 'renamed' } }));
      t.same(statuses(replies), [200, 409], JSON.stringify(replies.map((r) => r.json)));
      const loser = replies.find((r) => r.status === 409)!;
      t.equal(loser.json.error.code, 'conflict');
      t.equal(loser.json.error.message, 'A machine named renamed already exists.');
    });
  });
}

/**
 * Rate limits shared across processes (issue 24 item 2): signups from one IP split over two real control-plane
 * processes on one PostgreSQL are limited as if one process took them all (signup_ip: 10 an hour); the same on
 * SQLite in one process. On PostgreSQL the race is made certain by holding rate_limits' writes until all wait.
 */
import t from 'tap';
import { race, startServed, type Engine } from '../../helpers/served-processes.js';

for (const engine of ['postgres', 'sqlite'] as Engine[]) {
  t.test(`${engine}: 12 concurrent signups from one IP over both processes: exactly 10 pass`, async (t) => {
    const s = await startServed(t, engine);
    const replies = await race(s, 'rate_limits', 12, (b, i) =>
      s.call(b, 'POST', '/v1/auth/signup', { body: { email: `rl${i}-${engine}@example.com`, password: 'correct horse battery' }, ip: '198.51.100.77' }));
    const statuses = replies.map((r) => r.status).sort((a, b) => a - b);
    t.same(statuses, [201, 201, 201, 201, 201, 201, 201, 201, 201, 201, 429, 429], JSON.stringify(replies.map((r) => r.json)));
    for (const r of replies.filter((r) => r.status === 429)) t.equal(r.json.error.code, 'rate_limited');
  });
}

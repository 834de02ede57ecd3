/**
 * The asynchronous store lets another request run between two awaited store calls (issue 24 item 1): a
 * read-then-write that relied on the synchronous store must now be one transaction. Concurrent requests against
 * such a check must still find exactly its limit.
 */
import t from 'tap';
import { makeRig } from '../helpers/control-plane.js';

t.test('signup rate limit: of 12 concurrent signups from one address, exactly the window allowance (10) pass', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const answers = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      rig.call('POST', '/v1/auth/signup', { body: { email: `burst${i}@example.com`, password: 'correct horse battery' }, ip: '198.51.100.77' }),
    ),
  );
  const statuses = answers.map((a) => a.status).sort();
  t.same(statuses, [201, 201, 201, 201, 201, 201, 201, 201, 201, 201, 429, 429]);
  t.equal((await rig.store.db.q().selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n, 10, 'ten accounts, no more');
});

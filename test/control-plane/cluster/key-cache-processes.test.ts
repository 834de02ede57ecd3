/**
 * Remembered keys through the service on a real PostgreSQL (services/key-cache.ts; docs/security.md "Remembered
 * keys"): two `serve()` processes with AUTH_CACHE_MS at a minute, so a key each used is remembered whenever the
 * test asks (no clock in the test). A key revoked on a process stops working there at once: only the organization
 * service's forget() can explain it, since the entry is still fresh.
 */
import t from 'tap';
import { startServed, type HttpReply } from '../../helpers/served-processes.js';

const show = (r: HttpReply) => JSON.stringify(r.json);

t.test('postgres: a revoked key stops working at once on the process that revoked it, though remembered', async (t) => {
  const s = await startServed(t, 'postgres', { env: { AUTH_CACHE_MS: '60000' } });
  const { cookie } = await s.tenant('pro');
  const [A] = s.bases as [string, string];
  const made = await s.call(A, 'POST', '/v1/api-keys', { cookie, body: { name: 'second', scopes: ['machines:read'] } });
  t.equal(made.status, 201, show(made));
  const key = String(made.json.secret);
  t.equal((await s.call(A, 'GET', '/v1/machines', { key })).status, 200, 'the key works (and is now remembered on A)');
  t.equal((await s.call(A, 'GET', '/v1/machines', { key })).status, 200);
  const revoked = await s.call(A, 'DELETE', `/v1/api-keys/${String(made.json.id)}`, { cookie });
  t.equal(revoked.status, 204, show(revoked));
  const after = await s.call(A, 'GET', '/v1/machines', { key });
  t.equal(after.status, 401, `refused at once on A: ${show(after)}`);
  t.equal(after.json.error.code, 'unauthenticated');
});

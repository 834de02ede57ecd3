/**
 * Credentials are re-checked on open sockets: revoking an API key closes its channels (4401) within
 * the check interval, and leaves other credentials' sockets alone.
 */
import t from 'tap';
import { CLOSE_CODES } from '../../shared/schemas/gateway.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { open } from '../helpers/gateway-ws.js';

t.test('a revoked key loses its open channels', { timeout: 120_000 }, async (t) => {
  const g = await startGatewayRig(t, { gateway: { credentialCheckMs: 100 } });
  const url = `${g.wsBase}/v1/machines/${g.machineId}/events/live`;
  const second = await g.rig.key(g.tenant.cookie, ['machines:read']);

  const kept = await open(url, g.auth);
  const doomed = await open(url, { authorization: `Bearer ${second.key}` });
  // Both stay open across several checks while nothing changes.
  await new Promise((r) => setTimeout(r, 400));
  t.equal(kept.closed, null);
  t.equal(doomed.closed, null, 'a valid key keeps its socket');

  const revoked = await g.rig.call('DELETE', `/v1/api-keys/${second.keyId}`, { cookie: g.tenant.cookie });
  t.ok(revoked.status === 200 || revoked.status === 204, `revoked (${revoked.status})`);
  const closed = await doomed.closedP;
  t.equal(closed.code, CLOSE_CODES.unauthenticated, 'closed with 4401');

  await new Promise((r) => setTimeout(r, 300));
  t.equal(kept.closed, null, "another key's socket is untouched");
  await kept.close();
});

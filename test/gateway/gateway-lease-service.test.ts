/**
 * The input channel's lease decisions are the lease service's (services/leases.ts over domain/lease.ts):
 * before, gateway/from-services.ts kept its own copy, which answered a lapsed lease with the old fence
 * instead of null and never noticed an expiry on its own. For a stale fence, an expired lease, a forced
 * takeover and an expiry nobody acted on, the socket does exactly what the service decides.
 */
import t from 'tap';
import { open, type WsClient } from '../helpers/gateway-ws.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';

t.test('the input channel follows the lease service exactly', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate, services: { readyProbe: false } });
  const served = await serveWithGateway(rig);
  t.teardown(async () => {
    await served.close();
    await rig.close();
    fake.close();
  });
  const a = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'lease' } })).json;
  const session = async () => (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id as string;
  const acquire = async (sid: string, force = false, ttl = 60) => {
    const r = await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: a.key, body: { session_id: sid, ttl_seconds: ttl, force } });
    t.equal(r.status, 200, `acquire for ${sid}`);
    return r.json.fence as number;
  };
  const socket = (sid: string) => open(`${served.wsBase}/v1/machines/${m.id}/input?session_id=${sid}`, { authorization: `Bearer ${a.key}` });
  const move = (ws: WsClient, fence: number, id: string) => ws.sendJson({ type: 'mouse.move', x: 10, y: 20, fence, id });
  const principal = (await rig.services.identity.principalFromApiKey(a.key))!;
  const service = (sid: string, fence: number) => rig.services.leases.checkFence(principal, m.id, sid, fence);

  // Current fence: applied.
  const s1 = await session();
  const f1 = await acquire(s1);
  const ws1 = await socket(s1);
  t.same(await service(s1, f1), { ok: true });
  move(ws1, f1, 'ok');
  await ws1.waitFor(() => ws1.text('ack').find((x) => x.id === 'ok'), 'ack');

  // A fence above the current one: the service refuses; the socket says lease_lost with the service's fence.
  const decided = await service(s1, f1 + 1);
  t.same(decided, { ok: false, current: f1 });
  move(ws1, f1 + 1, 'high');
  const lost1 = await ws1.waitFor(() => ws1.text('lease_lost')[0], 'lease_lost (stale fence)');
  t.equal(lost1.fence, decided.ok ? undefined : decided.current);
  move(ws1, f1, 'after');
  t.notOk(ws1.text('ack').find((x) => x.id === 'after'), 'read-only afterwards');
  await ws1.close();

  // An expired lease: the service says not held (current null); so does the socket.
  const ws2 = await socket(s1);
  const f2 = await acquire(s1, false, 5);
  move(ws2, f2, 'before-expiry');
  await ws2.waitFor(() => ws2.text('ack').find((x) => x.id === 'before-expiry'), 'ack before expiry');
  rig.clock.t = Date.now() + 10_000;
  rig.clock.real = false;
  const expired = await service(s1, f2);
  t.same(expired, { ok: false, current: null }, 'the service: nobody holds it');
  move(ws2, f2, 'expired');
  const lost2 = await ws2.waitFor(() => ws2.text('lease_lost')[0], 'lease_lost (expired)');
  t.equal(lost2.fence, null, 'the socket says the same: no current fence');
  rig.clock.real = true;
  await ws2.close();

  // A forced takeover: the holder's socket hears it at once, without sending anything.
  const ws3 = await socket(s1);
  const f3 = await acquire(s1);
  move(ws3, f3, 'held');
  await ws3.waitFor(() => ws3.text('ack').find((x) => x.id === 'held'), 'ack while held');
  const s2 = await session();
  const f4 = await acquire(s2, true);
  t.equal(f4, f3 + 1, 'a takeover increments the fence');
  const lost3 = await ws3.waitFor(() => ws3.text('lease_lost')[0], 'lease_lost (takeover)');
  t.same(await service(s1, f3), { ok: false, current: f4 });
  t.equal(lost3.fence, f4, 'the new holder\'s fence, as the service says');
  const ws4 = await socket(s2);
  move(ws4, f4, 'new-holder');
  await ws4.waitFor(() => ws4.text('ack').find((x) => x.id === 'new-holder'), 'the new holder is applied');
  await ws3.close();

  // An expiry nobody acted on: the service's watch notices it on its own (ttl 5 s, real time).
  const f5 = await acquire(s2, false, 5);
  move(ws4, f5, 'short');
  await ws4.waitFor(() => ws4.text('ack').find((x) => x.id === 'short'), 'ack under the short lease');
  const lost4 = await ws4.waitFor(() => ws4.text('lease_lost')[0], 'lease_lost (expiry noticed by the watch)', 15_000);
  t.equal(lost4.fence, null);
  await ws4.close();
});

/**
 * The spec's subscription rule on the creating writes no entitlement counts: an `unsubscribed` or `canceled`
 * organization may not publish a port, store (or replace) a secret or create an API key — 402 `quota_exceeded`
 * with `quota.limit` `subscription`, nothing changed — while reads, removals and subscribing again still work.
 * Through /v1 with the fake substrate whose channels run the real agent app (secrets are delivered to it).
 */
import t from 'tap';
import { assertEnvelope } from '../helpers/control-plane.js';
import { fakeAgentsRig } from '../helpers/machines-fake-agent.js';
import { until, type MachinesRig } from '../helpers/machines-rig.js';

const SCOPES = ['machines:read', 'machines:write', 'machines:control', 'ports:write', 'secrets:write'];
/** The exact quota object of a refusal for a developer account that grants nothing. */
const SUBSCRIPTION = { limit: 'subscription', current: 0, maximum: 0, plan_id: 'developer', upgrade_url: null };

async function cancel(rig: MachinesRig, cookie: string): Promise<void> {
  const portal = await rig.call('POST', '/v1/billing/portal', { cookie, body: {} });
  if (portal.status !== 200) throw new Error(`portal ${portal.status} ${portal.text}`);
  const done = await rig.call('POST', `${new URL(portal.json.url).pathname}/cancel`, {});
  if (done.status !== 303) throw new Error(`cancel ${done.status}`);
}

t.test('a canceled organization publishes no port, stores no secret, creates no API key; it reads and removes', async (t) => {
  const { rig } = await fakeAgentsRig(t);
  const a = await rig.tenant('developer', SCOPES);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'box' } })).json;
  const ports = `/v1/machines/${m.id}/ports`;
  const secrets = `/v1/machines/${m.id}/secrets`;
  t.equal((await rig.call('POST', ports, { key: a.key, body: { port: 3000 } })).status, 201);
  t.equal((await rig.call('PUT', secrets, { key: a.key, body: { name: 'KEEP', value: 'one' } })).status, 200);
  t.equal((await rig.call('PUT', secrets, { key: a.key, body: { name: 'GONE', value: 'two' } })).status, 200);
  const spare = await rig.call('POST', '/v1/api-keys', { cookie: a.cookie, body: { name: 'spare', scopes: [] } });
  t.equal(spare.status, 201);

  await cancel(rig, a.cookie);
  // The billing stop runs on its own: let it settle (machine stopped, its capture ready) before refusing.
  await until('the billing stop', 200, async () => {
    const s = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}`, { key: a.key })).json.data;
    return s[0]?.state === 'ready' ? s : null;
  });
  t.equal((await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key })).json.state, 'stopped');

  const refusals = [
    ['publish a new port', await rig.call('POST', ports, { key: a.key, body: { port: 4000 } })],
    ['publish the published port again', await rig.call('POST', ports, { key: a.key, body: { port: 3000 } })],
    ['store a new secret', await rig.call('PUT', secrets, { key: a.key, body: { name: 'NEW', value: 'three' } })],
    ['replace a secret', await rig.call('PUT', secrets, { key: a.key, body: { name: 'KEEP', value: 'four' } })],
    ['create an API key', await rig.call('POST', '/v1/api-keys', { cookie: a.cookie, body: { name: 'late', scopes: [] } })],
  ] as const;
  for (const [what, r] of refusals) {
    assertEnvelope(t, r, 'quota_exceeded', 402);
    t.same(r.json.error.quota, SUBSCRIPTION, `${what}: 402 subscription`);
  }
  // Nothing changed, and every read still answers.
  t.same((await rig.call('GET', ports, { key: a.key })).json.data.map((p: { port: number }) => p.port), [3000]);
  t.same((await rig.call('GET', secrets, { key: a.key })).json.data.map((s: { name: string; version: number }) => [s.name, s.version]), [['GONE', 1], ['KEEP', 1]]);
  t.same((await rig.call('GET', '/v1/api-keys', { cookie: a.cookie })).json.data.map((k: { name: string }) => k.name).sort(), ['k', 'spare']);

  // Removing is not creating.
  const preview = (await rig.call('GET', ports, { key: a.key })).json.data[0].id;
  t.equal((await rig.call('DELETE', `${ports}/${preview}`, { key: a.key })).status, 204, 'unpublish');
  t.equal((await rig.call('DELETE', `${secrets}/GONE`, { key: a.key })).status, 204, 'revoke a secret');
  t.equal((await rig.call('DELETE', `/v1/api-keys/${spare.json.id}`, { cookie: a.cookie })).status, 204, 'revoke a key');

  // Subscribing restores access.
  const co = await rig.call('POST', '/v1/billing/checkout', { cookie: a.cookie, body: { plan_id: 'developer', success_url: 'http://cp.test/ok' } });
  t.equal(co.status, 200);
  t.equal((await rig.call('GET', new URL(co.json.url).pathname)).status, 303);
  t.equal((await rig.call('GET', '/v1/billing', { cookie: a.cookie })).json.state, 'active');
  t.equal((await rig.call('POST', ports, { key: a.key, body: { port: 4000 } })).status, 201);
  t.equal((await rig.call('PUT', secrets, { key: a.key, body: { name: 'KEEP', value: 'four' } })).json.version, 2);
  t.equal((await rig.call('POST', '/v1/api-keys', { cookie: a.cookie, body: { name: 'late', scopes: [] } })).status, 201);
});

t.test('an unsubscribed organization creates no API key', async (t) => {
  const { rig } = await fakeAgentsRig(t);
  const u = await rig.tenant('none');
  const r = await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'first', scopes: ['machines:read'] } });
  assertEnvelope(t, r, 'quota_exceeded', 402);
  t.same(r.json.error.quota, { limit: 'subscription', current: 0, maximum: 0, plan_id: 'none', upgrade_url: null });
  t.same((await rig.call('GET', '/v1/api-keys', { cookie: u.cookie })).json.data, [], 'none created');
  // The way out stays open: checkout, then a key.
  const co = await rig.call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'developer', success_url: 'http://cp.test/ok' } });
  t.equal((await rig.call('GET', new URL(co.json.url).pathname)).status, 303);
  t.equal((await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'first', scopes: ['machines:read'] } })).status, 201);
});

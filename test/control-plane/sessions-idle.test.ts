/**
 * Sessions go `idle` when no client has been attached for 5 minutes and are closed (reason `expired`)
 * after 60, on a controllable clock: attachment through the real gateway (a channel opened with
 * `?session_id=`), a live input lease keeping a REST agent's session in use, the handshake refusing
 * another user's session, and expired sessions no longer counting against concurrent_sessions.
 */
import t from 'tap';
import WebSocket from 'ws';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';
import { PUBLIC_ORIGIN } from '../helpers/control-plane.js';

const MIN = 60_000;

t.test('idle and expiry of sessions', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  const served = await serveWithGateway(rig);
  t.teardown(async () => {
    await served.close();
    fake.close();
    await rig.close();
  });
  const a = await rig.tenant('developer');
  const other = await rig.tenant('developer');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  // From here the clock only moves when the test moves it.
  rig.clock.t = Date.parse('2026-11-22T08:00:00.000Z');
  rig.clock.real = false;
  const open = async (type: string) => (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type } })).json.id as string;
  const state = async (id: string) => (await rig.call('GET', `/v1/sessions/${id}`, { key: a.key })).json.state as string;
  const used = async () => (await rig.call('GET', '/v1/billing', { key: a.key })).json.limits.find((l: any) => l.key === 'concurrent_sessions').current as number;
  const at = (min: number, sec = 0) => {
    rig.clock.t = Date.parse('2026-11-22T08:00:00.000Z') + min * MIN + sec * 1000;
    return rig.services.sessions.sweep();
  };

  const viewer = await open('view');
  const attachedAgent = await open('agent');
  const restAgent = await open('agent');
  t.equal(await used(), 3);

  // Attach through the gateway; another tenant cannot name (and so keep alive) this session.
  const connect = (sessionId: string, key: string, cookie?: string) =>
    new Promise<WebSocket>((resolve, reject) => {
      const headers: Record<string, string> = cookie ? { cookie, origin: PUBLIC_ORIGIN } : { authorization: `Bearer ${key}` };
      const ws = new WebSocket(`${served.wsBase}/v1/machines/${m.id}/events/live?session_id=${sessionId}`, { headers });
      ws.once('open', () => resolve(ws));
      ws.once("unexpected-response", (_req, res) => { let b = ""; res.on("data", (c) => (b += c)); res.on("end", () => reject(new Error(`status ${res.statusCode} ${b}`))); });
      ws.once('error', reject);
    });
  await t.rejects(connect(attachedAgent, other.key), /status 404/, "another organization's key: the machine is not found");
  // Security gate: a member of the same organization cannot attach (and so keep alive) someone else's session.
  const email = `member-${Date.now()}@example.com`;
  const su = await rig.call('POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery' }, ip: '203.0.113.77' });
  const memberCookie = `computer_session=${/computer_session=([^;]+)/.exec(su.headers.get('set-cookie') ?? '')![1]}`;
  const inv = await rig.call('POST', '/v1/invitations', { cookie: a.cookie, body: { email, role: 'member' } });
  t.equal((await rig.call('POST', '/v1/invitations/accept', { cookie: memberCookie, body: { token: inv.json.token } })).status, 200);
  t.equal((await rig.call('POST', '/v1/auth/switch-organization', { cookie: memberCookie, body: { organization_id: a.orgId } })).status, 200);
  await t.rejects(connect(attachedAgent, '', memberCookie), /status 403 .*opened by another user/);
  const sameOrgOtherKey = await rig.key(a.cookie, ['machines:read']);
  const own = await connect(attachedAgent, a.key);
  t.ok(own, 'attached');
  // A key of the same user may attach: its opener is that user's key (same user).
  const alsoOwn = await connect(attachedAgent, sameOrgOtherKey.key);
  alsoOwn.close();

  const lease = await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: a.key, body: { session_id: restAgent, ttl_seconds: 3600 } });
  t.equal(lease.status, 200);

  t.same((await at(4, 59)), { idled: [], expired: [] }, 'nothing idle before 5 minutes');
  t.same((await at(5)), { idled: [viewer], expired: [] }, 'the unattached viewer is idle at 5 minutes');
  t.equal(await state(viewer), 'idle');
  t.equal(await state(attachedAgent), 'active', 'an attached session stays active');
  t.equal(await state(restAgent), 'active', 'a live input lease keeps a session in use');
  t.equal(await used(), 3, 'idle sessions still count');

  // Attaching an idle session makes it active again; the clock restarts when its last client leaves.
  const back = await connect(viewer, a.key);
  t.equal(await state(viewer), 'active');
  await at(20);
  await new Promise<void>((r) => {
    back.once('close', () => r());
    back.close();
  });
  // The detach is recorded on the server's close handler; give it its turn.
  await new Promise((r) => setTimeout(r, 100));
  t.same((await at(24, 59)), { idled: [], expired: [] });
  t.same((await at(25)), { idled: [viewer], expired: [] }, 'idle 5 minutes after the last client left');

  // The REST agent releases its lease at 30 (the last sweep that saw it leased was at 25).
  rig.clock.t = Date.parse('2026-11-22T08:30:00.000Z');
  t.equal((await rig.call('DELETE', `/v1/machines/${m.id}/input-lease`, { key: a.key })).status, 204);
  t.same((await at(30)), { idled: [restAgent], expired: [] }, 'idle once its lease is gone (measured from the last sweep that saw it)');
  t.same((await at(79, 59)), { idled: [], expired: [] });
  t.same((await at(80)), { idled: [], expired: [viewer] }, 'expired 60 minutes after its last client left');
  const closed = (await rig.call('GET', `/v1/sessions/${viewer}`, { key: a.key })).json;
  t.equal(closed.state, 'closed');
  t.equal(closed.closed_at, '2026-11-22T09:20:00.000Z');
  t.equal(await used(), 2, 'an expired session stops counting against concurrent_sessions');
  t.same((await at(85)), { idled: [], expired: [restAgent] });
  const ev = (await rig.call('GET', `/v1/machines/${m.id}/events?limit=200`, { key: a.key })).json.data.filter((e: any) => e.type === 'session.disconnected');
  t.same(ev.map((e: any) => `${e.data.session_id}:${e.data.reason}:${e.data.by.type}`).sort(), [`${viewer}:expired:system`, `${restAgent}:expired:system`].sort());

  t.same((await at(200)), { idled: [], expired: [] }, 'the attached session never expires');
  t.equal(await state(attachedAgent), 'active');
  own.close();
  await new Promise((r) => setTimeout(r, 100));
  t.same((await at(205)), { idled: [attachedAgent], expired: [] });
  t.same((await at(260)), { idled: [], expired: [attachedAgent] });
  t.equal(await used(), 0);
  // A closed session cannot be attached.
  await t.rejects(connect(attachedAgent, a.key), /status 409/);
});

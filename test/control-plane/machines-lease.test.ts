/**
 * Sessions, the input lease and the proxied agent routes through /v1, with the fake substrate whose
 * channels run the real agent app.
 */
import t, { type Test } from 'tap';
import { assertEnvelope } from '../helpers/control-plane.js';
import { fakeAgentsRig } from '../helpers/machines-fake-agent.js';

function setup(t: Test) {
  return fakeAgentsRig(t);
}

t.test('sessions: open, list, get, close; opener recorded; concurrent_sessions quota', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('developer'); // concurrent_sessions 10
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const s = await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } });
  t.equal(s.status, 201);
  t.match(s.json, { machine_id: m.id, type: 'agent', state: 'active', opener: { type: 'api_key', id: a.keyId }, closed_at: null });
  const byUser = await rig.call('POST', '/v1/sessions', { cookie: a.cookie, body: { machine_id: m.id, type: 'human' } });
  t.same(byUser.json.opener, { type: 'user', id: a.userId });
  assertEnvelope(t, await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'robot' } }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: 'mch_' + 'x'.repeat(24), type: 'agent' } }), 'not_found', 404);
  t.equal((await rig.call('GET', `/v1/sessions/${s.json.id}`, { key: a.key })).json.id, s.json.id);
  for (let i = 2; i < 10; i++) t.equal((await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'view' } })).status, 201);
  const over = await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'view' } });
  assertEnvelope(t, over, 'quota_exceeded', 402);
  t.match(over.json.error.quota, { limit: 'concurrent_sessions', current: 10, maximum: 10 });
  t.equal((await rig.call('DELETE', `/v1/sessions/${s.json.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('GET', `/v1/sessions/${s.json.id}`, { key: a.key })).json.state, 'closed');
  t.equal((await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'view' } })).status, 201, 'closing frees a seat');
  const list = await rig.call('GET', `/v1/sessions?machine_id=${m.id}&state=closed`, { key: a.key });
  t.same(list.json.data.map((x: any) => x.id), [s.json.id]);
  const ev = await rig.call('GET', `/v1/machines/${m.id}/events?limit=200`, { key: a.key });
  t.ok(ev.json.data.some((e: any) => e.type === 'session.connected' && e.data.session_id === s.json.id));
  t.ok(ev.json.data.some((e: any) => e.type === 'session.disconnected' && e.data.session_id === s.json.id));
});

t.test('input lease: fence monotonic, renew, conflict, force, expiry, release', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const other = await rig.key(a.cookie, ['machines:control', 'sessions:write']);
  const s1 = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const s2 = (await rig.call('POST', '/v1/sessions', { key: other.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const sHuman = (await rig.call('POST', '/v1/sessions', { cookie: a.cookie, body: { machine_id: m.id, type: 'human' } })).json.id;
  const view = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'view' } })).json.id;
  const lease = `/v1/machines/${m.id}/input-lease`;

  t.same((await rig.call('GET', lease, { key: a.key })).json, { machine_id: m.id, held: false, session_id: null, fence: 0, expires_at: null, holder: null });
  rig.clock.real = false;
  const g1 = await rig.call('POST', lease, { key: a.key, body: { session_id: s1 } });
  t.equal(g1.status, 200);
  t.match(g1.json, { session_id: s1, fence: 1, renewed: false });
  t.equal(Date.parse(g1.json.expires_at) - rig.clock.t, 60_000, 'default ttl 60 s');
  const renew = await rig.call('POST', lease, { key: a.key, body: { session_id: s1, ttl_seconds: 120 } });
  t.match(renew.json, { fence: 1, renewed: true }, 'renewal keeps the fence');
  const held = await rig.call('GET', lease, { key: a.key });
  t.match(held.json, { held: true, session_id: s1, fence: 1, holder: { session_id: s1, type: 'agent', opener: { type: 'api_key', id: a.keyId } } });

  const clash = await rig.call('POST', lease, { key: other.key, body: { session_id: s2 } });
  assertEnvelope(t, clash, 'conflict', 409);
  t.match(clash.json.error.message, new RegExp(s1), 'names the holder');
  assertEnvelope(t, await rig.call('POST', lease, { key: other.key, body: { session_id: s1 } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', lease, { key: a.key, body: { session_id: view } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', lease, { key: a.key, body: { session_id: s1, ttl_seconds: 4 } }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', lease, { key: a.key, body: { session_id: s1, ttl_seconds: 3601 } }), 'invalid_request', 400);

  const forced = await rig.call('POST', lease, { cookie: a.cookie, body: { session_id: sHuman, force: true } });
  t.match(forced.json, { session_id: sHuman, fence: 2, renewed: false }, 'takeover increments the fence');

  // expiry
  rig.clock.t += 61_000;
  t.match((await rig.call('GET', lease, { key: a.key })).json, { held: false, fence: 2 });
  const g3 = await rig.call('POST', lease, { key: other.key, body: { session_id: s2, ttl_seconds: 5 } });
  t.match(g3.json, { session_id: s2, fence: 3 }, 'a grant after expiry increments the fence');

  // release by a non-holder names the holder; by the holder works
  const wrong = await rig.call('DELETE', `${lease}?session_id=${s1}`, { key: a.key });
  assertEnvelope(t, wrong, 'conflict', 409);
  t.equal((await rig.call('DELETE', `${lease}?session_id=${s2}`, { key: other.key })).status, 204);
  t.match((await rig.call('GET', lease, { key: a.key })).json, { held: false, fence: 3 });
  t.match((await rig.call('POST', lease, { key: a.key, body: { session_id: s1 } })).json, { fence: 4 }, 'a grant after release increments');

  // monotonic under many grants
  let last = 4;
  for (let i = 0; i < 30; i++) {
    const who = i % 2 === 0 ? { key: other.key, s: s2 } : { key: a.key, s: s1 };
    const r = await rig.call('POST', lease, { key: who.key, body: { session_id: who.s, force: true } });
    t.ok(r.json.fence > last, 'fence increases');
    last = r.json.fence;
  }

  // closing the holder's session releases the lease
  await rig.call('DELETE', `/v1/sessions/${s1}`, { key: a.key });
  t.match((await rig.call('GET', lease, { key: a.key })).json, { held: false });
  assertEnvelope(t, await rig.call('POST', lease, { key: a.key, body: { session_id: s1 } }), 'conflict', 409);

  const types = (await rig.call('GET', `/v1/machines/${m.id}/events?limit=200`, { key: a.key })).json.data.map((e: any) => e.type);
  t.ok(types.filter((x: string) => x === 'session.control_acquired').length >= 34);
  const revoked = (await rig.call('GET', `/v1/machines/${m.id}/events?limit=200`, { key: a.key })).json.data.find(
    (e: any) => e.type === 'session.control_released' && e.data.reason === 'revoked',
  );
  t.ok(revoked, 'a takeover records the revoked holder');
  t.ok(['user', 'api_key'].includes(revoked.data.by.type), 'says who took over');
  // stopping the machine releases whatever lease there is
  await rig.call('POST', lease, { key: other.key, body: { session_id: s2, force: true } });
  await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  t.match((await rig.call('GET', lease, { key: a.key })).json, { held: false });
});

t.test('proxied routes: lease enforcement on input, reads without lease, envelopes relayed', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const other = await rig.key(a.cookie, ['machines:control', 'sessions:write']);
  const s1 = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const s2 = (await rig.call('POST', '/v1/sessions', { key: other.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const base = `/v1/machines/${m.id}`;

  // reads need no lease
  const disp = await rig.call('GET', `${base}/display`, { key: a.key });
  t.same(disp.json, { width: 1280, height: 800, up: true, resizable: true });
  const shot = await rig.call('GET', `${base}/screenshot?format=png`, { key: a.key });
  t.equal(shot.status, 200);
  t.equal(Buffer.from(shot.json.image, 'base64').toString(), 'frame');
  assertEnvelope(t, await rig.call('GET', `${base}/screenshot?format=gif`, { key: a.key }), 'invalid_request', 400);

  // input without the lease
  const move = { x: 10, y: 20 };
  const noHeader = await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: move });
  assertEnvelope(t, noHeader, 'invalid_request', 400);
  t.equal(noHeader.json.error.details[0].field, 'x-session-id');
  assertEnvelope(t, await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: move, headers: { 'x-session-id': s1 } }), 'conflict', 409);
  await rig.call('POST', `${base}/input-lease`, { key: a.key, body: { session_id: s1 } });
  const okMove = await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: move, headers: { 'x-session-id': s1, 'x-lease-fence': '1' } });
  t.equal(okMove.status, 200);
  t.same(okMove.json.pointer, move);
  t.same(fake.desktopOf(m.id).pointer, move, 'reached the agent');
  const stale = await rig.call('POST', `${base}/keyboard/type`, { key: a.key, body: { text: 'x' }, headers: { 'x-session-id': s1, 'x-lease-fence': '0' } });
  assertEnvelope(t, stale, 'conflict', 409);
  t.same(fake.desktopOf(m.id).typed, [], 'a refused input never reaches the agent');
  assertEnvelope(t, await rig.call('POST', `${base}/keyboard/type`, { key: other.key, body: { text: 'x' }, headers: { 'x-session-id': s2 } }), 'conflict', 409);
  assertEnvelope(t, await rig.call('POST', `${base}/keyboard/type`, { key: other.key, body: { text: 'x' }, headers: { 'x-session-id': s1 } }), 'permission_denied', 403);
  // takeover: the old holder's fence is stale now
  await rig.call('POST', `${base}/input-lease`, { key: other.key, body: { session_id: s2, force: true } });
  const lost = await rig.call('POST', `${base}/keyboard/type`, { key: a.key, body: { text: 'x' }, headers: { 'x-session-id': s1, 'x-lease-fence': '1' } });
  assertEnvelope(t, lost, 'conflict', 409);
  t.match(lost.json.error.message, new RegExp(s2));
  const typed = await rig.call('POST', `${base}/keyboard/type`, { key: other.key, body: { text: 'hello' }, headers: { 'x-session-id': s2, 'x-lease-fence': '2' } });
  t.equal(typed.status, 200);
  t.same(fake.desktopOf(m.id).typed, ['hello']);

  // the agent's own refusal is relayed with the control plane's request id
  const off = await rig.call('POST', `${base}/mouse/click`, { key: other.key, body: { at: { x: 5000, y: 10 } }, headers: { 'x-session-id': s2 } });
  assertEnvelope(t, off, 'invalid_request', 400);
  t.equal(off.json.error.details[0].field, 'at');
  // validation happens at /v1 before the channel
  const badKey = await rig.call('POST', `${base}/mouse/move`, { key: other.key, body: { x: -1, y: 0 }, headers: { 'x-session-id': s2 } });
  assertEnvelope(t, badKey, 'invalid_request', 400);
  t.equal(badKey.json.error.details[0].field, 'x');

  // exec needs machines:control and no lease; a non-zero exit is a 200
  const ex = await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['sh', '-c', 'printf out; printf err >&2; exit 3'], user: 'root' } });
  t.equal(ex.status, 200);
  t.match(ex.json, { stdout: 'out', stderr: 'err', exit_code: 3 });
  assertEnvelope(t, await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: [] } }), 'invalid_request', 400);

  // a route the agent does not serve is relayed as its 404 envelope
  const noFiles = await rig.call('GET', `${base}/files?path=/`, { key: a.key });
  assertEnvelope(t, noFiles, 'not_found', 404);

  // desktop not up → 503
  fake.desktopOf(m.id).up = false;
  const down = await rig.call('GET', `${base}/display`, { key: a.key });
  assertEnvelope(t, down, 'compute_unavailable', 503);
  t.ok(down.headers.get('retry-after'));
  assertEnvelope(t, await rig.call('GET', `${base}/screenshot`, { key: a.key }), 'compute_unavailable', 503);

  // a stopped machine: conflict naming the state
  await rig.call('POST', `${base}/stop`, { key: a.key });
  const stopped = await rig.call('GET', `${base}/display`, { key: a.key });
  assertEnvelope(t, stopped, 'conflict', 409);
  t.match(stopped.json.error.message, /stopped/);
  // started again: the pool dials a fresh session
  fake.desktopOf(m.id).up = true;
  await rig.call('POST', `${base}/start`, { key: a.key });
  t.equal((await rig.call('GET', `${base}/display`, { key: a.key })).status, 200);

  const all = rig.bodies.join('\n');
  const token = (await rig.store.machines.byId(m.id))!.agent_token;
  t.notOk(all.includes(token), 'no response carries the guest token');
});

t.test('gateway hooks: checkSession, checkFence, watch', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro');
  const other = await rig.key(a.cookie, ['machines:control', 'sessions:write']);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const s1 = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const s2 = (await rig.call('POST', '/v1/sessions', { key: other.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const pA = (await rig.services.identity.principalFromApiKey(a.key))!;
  const { leases, events } = rig.services;
  await t.resolves(leases.checkSession(pA, m.id, s1), 'own session');
  await t.rejects(leases.checkSession(pA, m.id, s2), { code: 'permission_denied' }, "another key's session");
  t.throws(() => events.validateCursor('garbage'), { code: 'invalid_request' });
  const released: string[] = [];
  const unwatch = leases.watch(m.id, (sid) => released.push(sid));
  await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: a.key, body: { session_id: s1 } });
  t.same(await leases.checkFence(pA, m.id, s1, 1), { ok: true });
  t.same(await leases.checkFence(pA, m.id, s1, 2), { ok: false, current: 1 });
  await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: other.key, body: { session_id: s2, force: true } });
  t.same(await leases.checkFence(pA, m.id, s1, 1), { ok: false, current: 2 }, 'the old holder is told the current fence');
  await rig.call('DELETE', `/v1/machines/${m.id}/input-lease`, { key: other.key });
  await new Promise((r) => setTimeout(r, 20));
  t.same(released, [s1, s2], 'takeover and release are both reported');
  t.same(await leases.checkFence(pA, m.id, s2, 2), { ok: false, current: null });
  unwatch();
});

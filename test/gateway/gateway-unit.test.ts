/**
 * Gateway logic in isolation: the token bucket with a fake clock, the egress counter, and the gateway
 * on a real loopback HTTP server with stub dependencies (fencing decisions scripted by the test, agent
 * calls recorded), slow event consumers, and shutdown.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError } from '../../shared/errors.js';
import type { Principal } from '../../control-plane/src/context.js';
import type { AgentCall, GatewayDeps } from '../../control-plane/src/gateway/deps.js';
import { attachGateway } from '../../control-plane/src/gateway/gateway.js';
import { TokenBucket } from '../../control-plane/src/gateway/rate.js';
import { EgressCounter } from '../../control-plane/src/gateway/send.js';
import { connect, open, WsClient } from '../helpers/gateway-ws.js';

t.test('token bucket', async (t) => {
  let now = 0;
  const b = new TokenBucket(2, 3, () => now);
  t.same([b.take(), b.take(), b.take(), b.take()], [true, true, true, false], 'a burst of 3, then refused');
  now += 500;
  t.same([b.take(), b.take()], [true, false], 'refills at 2 per second');
  now += 10_000;
  t.same([b.take(), b.take(), b.take(), b.take()], [true, true, true, false], 'never saves more than the burst');
});

t.test('egress counter', async (t) => {
  const e = new EgressCounter();
  e.add('mch_a', 10);
  e.add('mch_a', 5);
  e.add('mch_b', 1);
  t.equal(e.peek('mch_a'), 15);
  t.same([...e.take()], [['mch_a', 15], ['mch_b', 1]]);
  t.equal(e.peek('mch_a'), 0, 'take resets');
});

const MID = 'mch_' + 'a'.repeat(24);
const KEY = 'sk_test_gateway';

function principal(perms: string[]): Principal {
  return {
    kind: 'api_key', user_id: 'usr_1', auth_session_id: null, api_key_id: 'key_1', org_id: 'org_1', role: 'member',
    scopes: null, permissions: new Set(perms) as Principal['permissions'], via_cookie: false,
  };
}

async function stubGateway(t: Test, over: Partial<GatewayDeps> = {}, opts: Parameters<typeof attachGateway>[2] = {}) {
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const calls: AgentCall[] = [];
  const egress = new EgressCounter();
  const lease = { holder: 'ses_1', fence: 4 };
  const watchers = new Set<(s: string, f: number) => void>();
  const deps: GatewayDeps = {
    authenticate: (req) => (req.headers.authorization === `Bearer ${KEY}` ? principal(['machines:control']) : null),
    isRecognisedOrigin: () => false,
    getMachine: (_org, id) => {
      if (id !== MID) throw new AppError('not_found', 'No such machine.');
      return { id, state: 'running' };
    },
    openAgentStream: () => Promise.reject(new AppError('compute_unavailable', 'no agent in this test')),
    callAgent: async (_o, _m, req) => {
      calls.push(req);
      // A valid InputResult: agent answers are parsed against their route's schema.
      return { status: 200, body: Buffer.from(JSON.stringify({ display: { width: 1280, height: 800, up: true, resizable: true }, pointer: null })) };
    },
    leases: {
      checkSession: (_p, _m, sid) => {
        if (!sid.startsWith('ses_')) throw new AppError('not_found', 'No such session.');
      },
      checkFence: (_p, _m, sid, fence) => (sid === lease.holder && fence === lease.fence ? { ok: true } : { ok: false, current: lease.fence }),
      watch: (_m, fn) => {
        watchers.add(fn);
        return () => watchers.delete(fn);
      },
    },
    events: { validateCursor: () => {}, subscribe: () => () => {} },
    egress,
    secretForTyping: (_o, _m, name) => {
      if (name === 'PW') return 'unit-secret-value-31f';
      throw new AppError('not_found', 'No such secret.');
    },
    ...over,
  };
  const gw = attachGateway(server, deps, opts);
  t.teardown(async () => {
    await gw.close();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
  /** A takeover: the lease moves to another session with the next fence; watchers hear the release. */
  const takeover = () => {
    const old = { ...lease };
    lease.holder = 'ses_2';
    lease.fence++;
    for (const w of watchers) w(old.holder, old.fence);
  };
  return { url, calls, egress, lease, takeover, gw };
}

t.test('a secret typed by reference: a guest echoing it in an error reaches the client as a code only', async (t) => {
  const s = await stubGateway(t, {
    callAgent: async (_o, _m, req) => ({
      status: 400,
      body: Buffer.from(JSON.stringify({ error: { code: 'invalid_request', message: `cannot type ${JSON.parse(req.body!).text}`, request_id: 'r', details: [{ field: 'text', message: String(req.body) }] } })),
    }),
  });
  const c = await open(`${s.url}/v1/machines/${MID}/input?session_id=ses_1`, { authorization: `Bearer ${KEY}` });
  c.sendJson({ type: 'keyboard.type', fence: 4, secret: 'PW', id: 'k1' });
  c.sendJson({ type: 'keyboard.type', fence: 4, text: 'plain', id: 'k2' });
  const plain = await c.waitFor(() => c.text('error').find((e) => e.id === 'k2'), 'error k2');
  const echoed = c.text('error').find((e) => e.id === 'k1');
  t.same(echoed, { type: 'error', id: 'k1', code: 'invalid_request', message: 'The machine could not type the secret.' }, 'code only');
  t.match(plain.message, 'cannot type plain', 'plain text errors are relayed as before');
  t.notOk(JSON.stringify(c.texts).includes('unit-secret-value-31f'), 'the value never reaches the client');
  await c.close();
});

t.test('input fencing with a scripted lease', async (t) => {
  const s = await stubGateway(t);
  const auth = { authorization: `Bearer ${KEY}` };
  const c = await open(`${s.url}/v1/machines/${MID}/input?session_id=ses_1`, auth);
  c.sendJson({ type: 'mouse.move', fence: 4, x: 1, y: 2, id: 'a' });
  await c.waitFor(() => c.text('ack').length === 1, 'ack');
  t.same(s.calls, [{ method: 'POST', path: '/mouse/move', body: JSON.stringify({ x: 1, y: 2 }) }], 'forwarded without type, fence, id');
  s.takeover();
  await c.waitFor(() => c.text('lease_lost').length === 1, 'lease_lost from the watch');
  t.match(c.text('lease_lost')[0], { fence: 5 });
  c.sendJson({ type: 'mouse.move', fence: 4, x: 3, y: 3 });
  c.sendJson({ type: 'mouse.move', fence: 5, x: 3, y: 3 });
  await new Promise<void>((r) => {
    c.ws.once('pong', () => r());
    c.ws.ping();
  });
  t.equal(s.calls.length, 1, 'nothing forwarded after the loss');
  t.equal(c.text('lease_lost').length, 1, 'one lease_lost only');

  // The message path: a lower fence on a socket that never applied anything.
  const d = await open(`${s.url}/v1/machines/${MID}/input?session_id=ses_2`, auth);
  d.sendJson({ type: 'keyboard.key', fence: 4, key: 'a' });
  d.sendJson({ type: 'keyboard.key', fence: 5, key: 'b' });
  await d.waitFor(() => d.text('lease_lost').length === 1, 'lease_lost for a stale fence');
  await new Promise<void>((r) => {
    d.ws.once('pong', () => r());
    d.ws.ping();
  });
  t.equal(s.calls.length, 1, 'neither the stale message nor the one after it was forwarded');
  t.equal(d.text('lease_lost').length, 1);
  t.ok(s.egress.peek(MID) > 0, 'answers count as egress');
});

t.test('rate limit with small limits', async (t) => {
  const s = await stubGateway(t, {}, { input: { ratePerSecond: 1, burst: 5, rateNoticeMs: 60_000 } });
  const c = await open(`${s.url}/v1/machines/${MID}/input?session_id=ses_1`, { authorization: `Bearer ${KEY}` });
  for (let i = 0; i < 50; i++) c.sendJson({ type: 'mouse.move', fence: 4, x: i, y: 0 });
  await c.waitFor(() => c.text('error').length >= 1, 'rate_limited');
  await new Promise<void>((r) => {
    c.ws.once('pong', () => r());
    c.ws.ping();
  });
  await c.waitFor(() => c.text('ack').length >= 5, 'acks');
  t.ok(c.text('ack').length <= 6, `the burst of 5 (plus at most one refill) is applied: ${c.text('ack').length}`);
  t.equal(c.text('error').length, 1, 'one notice per notice interval, not one per dropped message');
  t.match(c.text('error')[0], { code: 'rate_limited', message: /1 messages per second \(bursts of 5\)/ });
  t.equal(c.closed, null, 'the socket stays open');
});

t.test('a slow events consumer is closed with 4408, never sent a gap', async (t) => {
  type Deliver = (d: { cursor: string; event: unknown }) => void;
  let deliver = null as Deliver | null;
  const s = await stubGateway(t, {
    events: {
      validateCursor: () => {},
      subscribe: (_m, _c, fn) => {
        deliver = fn;
        return () => (deliver = null);
      },
    },
  }, { eventsMaxBuffered: 64 * 1024 });
  const c = await open(`${s.url}/v1/machines/${MID}/events/live`, { authorization: `Bearer ${KEY}` });
  await c.waitFor(() => deliver !== null || undefined, 'subscribed');
  (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  const big = 'x'.repeat(16 * 1024);
  for (let i = 0; i < 2000 && deliver; i++) (deliver as Deliver)({ cursor: `c${i}`, event: { id: `evt_${i}`, data: big } });
  t.equal(deliver, null, 'the gateway unsubscribed');
  (c.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  const closed = await c.closedP;
  t.equal(closed.code, 4408);
  const ids = c.texts.map((m) => m.event.id);
  t.same(ids, ids.map((_x, i) => `evt_${i}`), 'what arrived is a prefix of the log: resumable from the last cursor');
});

t.test('routing, refusals and shutdown', async (t) => {
  const s = await stubGateway(t);
  const auth = { authorization: `Bearer ${KEY}` };
  const nope = await connect(`${s.url}/v1/nothing-here`, auth);
  t.match(nope, { status: 404, body: { error: { code: 'not_found', request_id: /^req_/, details: [], quota: null } } });
  t.match(await connect(`${s.url}/v1/machines/${MID}/input?session_id=bad`, auth), { status: 404 });
  t.match(await connect(`${s.url}/v1/machines/${MID}/screen`, { authorization: 'Bearer wrong' }), { status: 401 });
  const screen = await open(`${s.url}/v1/machines/${MID}/screen`, auth);
  const st = await screen.waitFor(() => screen.text('status')[0], 'status');
  t.match(st, { up: false, code: 'compute_unavailable', message: 'no agent in this test' }, 'an unreachable agent is a status, not a close');
  t.equal(screen.texts.length, 1, 'the first status is the real one');
  await s.gw.close();
  t.equal((await screen.closedP).code, 1001, 'shutdown closes channels with 1001');
  const after = await connect(`${s.url}/v1/machines/${MID}/screen`, auth).catch((e: Error) => e);
  t.notOk(after instanceof WsClient, 'no new channels after close');
});

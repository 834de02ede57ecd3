/**
 * Gateway logic in isolation: the token bucket with a fake clock, the egress counter, and the gateway
 * on a real loopback HTTP server with stub dependencies (fencing decisions scripted by the test, agent
 * calls recorded), slow event consumers, shutdown, and the screen channel's `tiles` encoding over a
 * scripted (honest or hostile) agent screen stream.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { encodeScreenMessage } from '../../shared/agent-protocol.js';
import { AppError } from '../../shared/errors.js';
import { decodeScreenTilesMessage } from '../../shared/screen-tiles.js';
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
    authenticate: async (req) => (req.headers.authorization === `Bearer ${KEY}` ? principal(['machines:control']) : null),
    isRecognisedOrigin: () => false,
    getMachine: async (_org, id) => {
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
      checkSession: async (_p, _m, sid) => {
        if (!sid.startsWith('ses_')) throw new AppError('not_found', 'No such session.');
      },
      checkFence: async (_p, _m, sid, fence) => (sid === lease.holder && fence === lease.fence ? { ok: true } : { ok: false, current: lease.fence }),
      watch: (_m, fn) => {
        watchers.add(fn);
        return () => watchers.delete(fn);
      },
    },
    events: { validateCursor: () => {}, subscribe: () => () => {} },
    egress,
    secretForTyping: async (_o, _m, name) => {
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

/**
 * A scripted agent screen stream: a real HTTP/2 server whose /screen/stream writes the messages the test
 * chose for that stream's `fps` and encoding (script `2` for fps=2, `2t` for fps=2&encoding=tiles) and
 * then stays open.
 */
async function scriptedScreenAgent(t: Test, scripts: Record<string, Buffer[]>) {
  const paths: string[] = [];
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    const p = String(headers[':path']);
    paths.push(p);
    const q = new URL(p, 'http://agent').searchParams;
    const script = `${q.get('fps')}${q.get('encoding') === 'tiles' ? 't' : ''}`;
    stream.on('error', () => {}); // the gateway resets streams it refuses
    stream.respond({ ':status': 200 });
    for (const m of scripts[script] ?? []) stream.write(m);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  t.teardown(async () => {
    session.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const openAgentStream: GatewayDeps['openAgentStream'] = (_o, _m, req) => new Promise((resolve, reject) => {
    const stream = session.request({ ':method': req.method, ':path': req.path });
    stream.once('response', (headers) => resolve({ status: Number(headers[':status']), headers, stream }));
    stream.once('error', reject);
  });
  return { paths, openAgentStream };
}

t.test('screen tiles: negotiated per viewer, key frame first, hostile deltas refused', async (t) => {
  const status = encodeScreenMessage({ type: 'status', up: true, width: 128, height: 64, bytes: 0 });
  const base = { seq: 0, format: 'jpeg' as const, width: 128, height: 64, captured_at: 1763800000000 };
  const key = encodeScreenMessage({ type: 'frame', ...base, bytes: 4 }, Buffer.from('KEY!'));
  const delta = (rect: { x: number; y: number; w: number; h: number }, seq = 1, size = { width: 128, height: 64 }) =>
    encodeScreenMessage({ type: 'tiles', ...base, ...size, seq, copy: null, rects: [{ ...rect, bytes: 3 }], bytes: 3 }, Buffer.from(`T${seq}_`.slice(0, 3)));
  const good = delta({ x: 64, y: 0, w: 64, h: 64 });
  /** A hostile delta whose header the agent framing itself cannot express: written raw. */
  const rawTiles = (header: object, payload: Buffer) => {
    const json = Buffer.from(JSON.stringify(header));
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    return Buffer.concat([len, json, payload]);
  };
  const outside = rawTiles({ type: 'tiles', ...base, seq: 2, copy: null, rects: [{ x: 100, y: 0, w: 64, h: 64, bytes: 3 }], bytes: 3 }, Buffer.from('BAD'));
  const agent = await scriptedScreenAgent(t, {
    '1': [status, key],
    '1t': [status, key, good],
    '2t': [status, key, good, outside, delta({ x: 0, y: 0, w: 64, h: 64 }, 3)],
    '3t': [status, key, delta({ x: 0, y: 0, w: 64, h: 64 }, 1, { width: 256, height: 64 })],
    '4t': [status, delta({ x: 0, y: 0, w: 64, h: 64 }, 1), key, good],
    '5t': [status, key, ...Array.from({ length: 5 }, (_x, i) => delta({ x: 0, y: 0, w: 64, h: 64 }, i + 1))],
  });
  const logs: Array<Record<string, unknown>> = [];
  const s = await stubGateway(t, { openAgentStream: agent.openAgentStream, log: (l) => logs.push(l) }, { screen: { retryMs: 60_000, maxReplay: key.length + 2 * good.length } });
  const auth = { authorization: `Bearer ${KEY}` };
  const screen = (q: string) => open(`${s.url}/v1/machines/${MID}/screen?${q}`, auth);
  const decoded = (c: WsClient) => c.binaries.map((b) => {
    const m = decodeScreenTilesMessage(b);
    return { type: m.header.type, seq: m.header.seq, images: m.images.map((i) => `${i.x},${i.y}:${Buffer.from(i.data).toString()}`) };
  });

  await t.test('an honest stream: the key frame, then the delta; a late viewer gets both; frames viewers get bare images', async (t) => {
    const a = await screen('fps=1&encoding=tiles');
    await a.waitFor(() => a.binaries.length >= 2, 'key + delta');
    t.match(a.text('status')[0], { up: true, width: 128, height: 64, format: 'jpeg', encoding: 'tiles' });
    t.same(decoded(a), [{ type: 'frame', seq: 0, images: ['0,0:KEY!'] }, { type: 'tiles', seq: 1, images: ['64,0:T1_'] }]);
    const late = await screen('fps=1&encoding=tiles');
    await late.waitFor(() => late.binaries.length >= 2, 'the replayed picture');
    t.same(decoded(late), decoded(a), 'a joining viewer is sent the key frame and the deltas since, in order');
    t.equal(s.gw.screenStreams().filter((x) => x.key.endsWith('|tiles')).length, 1, 'tiles viewers share one agent stream');
    const old = await screen('fps=1');
    await old.waitFor(() => old.binaries.length >= 1, 'a frames viewer\'s image');
    t.same(old.binaries.map((b) => b.toString()), ['KEY!'], 'the default encoding: bare images only, never a delta');
    t.match(old.text('status')[0], { encoding: 'frames' });
    t.same(agent.paths.filter((p) => p.includes('fps=1')).sort(), [
      '/screen/stream?format=jpeg&quality=60&fps=1',
      '/screen/stream?format=jpeg&quality=60&fps=1&encoding=tiles',
    ], 'the agent is asked for tiles only by tiles viewers (older agents never see the parameter)');
    await Promise.all([a.close(), late.close(), old.close()]);
  });

  await t.test('a rectangle outside the frame ends the agent stream before anything of it reaches a viewer', async (t) => {
    const c = await screen('fps=2&encoding=tiles');
    await c.waitFor(() => c.text('status').find((m) => m.up === false), 'the screen reported down');
    // The messages before it may be dropped with it (they can arrive in the same chunk); nothing after is sent.
    t.ok(decoded(c).every((m) => m.seq < 2), 'nothing from the bad delta on');
    t.notOk(c.binaries.some((m) => m.includes('BAD')), 'the bad rectangle\'s image never reaches a viewer');
    t.match(logs.find((l) => l.event === 'agent_protocol_violation'), { channel: 'screen', reason: /rects\.0/ });
    await c.close();
  });

  await t.test('a delta for another size than the announced one is a violation', async (t) => {
    const before = logs.length;
    const c = await screen('fps=3&encoding=tiles');
    await c.waitFor(() => c.text('status').find((m) => m.up === false), 'the screen reported down');
    t.same(decoded(c), [{ type: 'frame', seq: 0, images: ['0,0:KEY!'] }]);
    t.match(logs.slice(before), [{ event: 'agent_protocol_violation', reason: 'tiles that do not fit the picture' }]);
    await c.close();
  });

  await t.test('a delta before any key frame is not forwarded', async (t) => {
    const c = await screen('fps=4&encoding=tiles');
    await c.waitFor(() => c.binaries.length >= 2, 'key + delta');
    t.same(decoded(c).map((m) => m.type), ['frame', 'tiles']);
    await c.close();
  });

  await t.test('a history above maxReplay is dropped: a late viewer waits for the next key frame', async (t) => {
    const a = await screen('fps=5&encoding=tiles');
    await a.waitFor(() => a.binaries.length >= 3, 'what fits');
    const late = await screen('fps=5&encoding=tiles');
    await late.waitFor(() => late.text('status').length >= 1, 'status');
    // A ping round trip each: anything the gateway sent before has arrived before the pong.
    for (const c of [late, a]) {
      await new Promise<void>((r) => {
        c.ws.once('pong', () => r());
        c.ws.ping();
      });
    }
    t.same(late.binaries, [], 'no deltas without their key frame');
    // maxReplay holds exactly the key frame and two deltas: the third does not fit.
    t.same(decoded(a).map((m) => m.seq), [0, 1, 2], 'deltas beyond the replay bound were not sent');
    await Promise.all([a.close(), late.close()]);
  });
});

/**
 * The short way in (control-plane/src/api/forward-front.ts): which requests it takes, pinned literally over the real
 * operation table, and what it does with them over the real node server (http-server.ts). The cluster's parts it
 * calls are fakes here (a unit test of the decision: the forwarder records what it was given and answers or refuses
 * as told); the real forward through it is test/control-plane/cluster/owner-cache.test.ts.
 */
import http from 'node:http';
import type { Readable } from 'node:stream';
import t from 'tap';
import { forwardFront, frontMatch, frontRoutes } from '../../control-plane/src/api/forward-front.js';
import { ALL_OPS } from '../../control-plane/src/api/v1/index.js';
import type { ForwardCall } from '../../control-plane/src/cluster/forward/call.js';
import type { Forwarder } from '../../control-plane/src/cluster/forward/forwarder.js';
import type { Settled } from '../../control-plane/src/cluster/forward/forward-request.js';
import type { RemoteOwner } from '../../control-plane/src/cluster/forward/owner.js';
import { ownerCache } from '../../control-plane/src/cluster/owner-cache.js';
import type { Routing } from '../../control-plane/src/cluster/routing.js';
import type { OrgPrincipal } from '../../control-plane/src/context.js';
import { createHttpServer } from '../../control-plane/src/http-server.js';
import { listen } from '../../control-plane/src/listen.js';
import type { LogLine } from '../../control-plane/src/log.js';

const M = 'mch_0123456789abcdefghijklmn';

t.test('which operations the short way takes: exactly one machine operation forwarded to its driver', async (t) => {
  const routes = frontRoutes(ALL_OPS);
  const m = (method: string, path: string) => frontMatch(routes, method, path);
  t.same(m('POST', `/v1/machines/${M}/mouse/move`), { name: 'machines.mouse_move', machineId: M });
  t.same(m('GET', `/v1/machines/${M}/screenshot`), { name: 'machines.screenshot', machineId: M });
  t.same(m('PATCH', `/v1/machines/${M}`), { name: 'machines.update', machineId: M });
  t.same(m('POST', `/v1/machines/${M}/exec`), { name: 'machines.exec', machineId: M });
  t.same(m('POST', `/v1/machines/${M}/stop`), { name: 'machines.stop', machineId: M });
  t.equal(m('GET', `/v1/machines/${M}`), null, 'a read of the record is served anywhere (owner any)');
  t.equal(m('GET', `/v1/machines/${M}/events`), null, 'so are its events');
  t.equal(m('GET', `/v1/machines/${M}/input-lease`), null, 'and its lease');
  t.equal(m('POST', `/v1/machines/${M}/fork`), null, 'a fork is placed (owner host)');
  t.equal(m('POST', '/v1/machines'), null, 'a create is placed');
  t.equal(m('GET', '/v1/machines'), null);
  t.equal(m('POST', `/v1/machines/${M}/mouse/move/`), null, 'a trailing slash is not the route');
  t.equal(m('GET', `/v1/machines/${M}/mouse/move`), null, 'the method is part of the route');
  t.equal(m('POST', '/v1/machines/mch_%30/mouse/move'), null, 'an escaped path is left to the app, which decodes it');
  t.equal(m('POST', '/v1/auth/login'), null);
});

interface Seen {
  call: ForwardCall;
  body: string;
}

/** A forwarder that records each attempt and answers it (200 "forwarded") or refuses it, as `next` says. */
function fakeForwarder(next: () => Settled): { forwarder: Forwarder; seen: Seen[]; attempts(): number } {
  const seen: Seen[] = [];
  let attempts = 0;
  const unused = () => {
    throw new Error('not used by the short way');
  };
  const forwarder: Forwarder = {
    open: unused, request: unused, fetch: unused, upgrade: unused, buffered: unused, channels: () => 0, close: () => {},
    async attempt(req, res, call, body?: Readable | Buffer) {
      attempts++;
      const chunks: Buffer[] = [];
      // As the real forwarder reads a stream (by its 'data' events, forward-request.ts `pipe`), beside the front's hold.
      if (Buffer.isBuffer(body)) chunks.push(body);
      // Until the body ends, or the caller leaves before it does.
      else await new Promise<void>((resolve) => (body ?? req).on('data', (c: Buffer) => chunks.push(c)).once('end', resolve).once('close', resolve));
      seen.push({ call, body: Buffer.concat(chunks).toString() });
      const settled = next();
      if (settled === 'answered') res.writeHead(200, { 'content-type': 'text/plain' }).end('forwarded');
      return settled;
    },
  };
  return { forwarder, seen, attempts: () => attempts };
}

const principal: OrgPrincipal = {
  kind: 'api_key', user_id: 'usr_1', auth_session_id: null, api_key_id: 'key_1', org_id: 'org_1', role: 'member',
  scopes: null, permissions: new Set(['machines:control']), via_cookie: false,
};
const owner: RemoteOwner = { kind: 'remote', processId: 'cp-0123456789abcdef01234567', address: 'http://127.0.0.1:1' };

t.test('over the node server: taken, left to the app, handed back with its body', async (t) => {
  let answer: Settled = 'answered';
  const { forwarder, seen, attempts } = fakeForwarder(() => answer);
  const owners = ownerCache({ ttlMs: 600_000 });
  const unused = () => Promise.reject(new Error('not used by the short way'));
  const routing: Routing = {
    ownerOf: unused, owners, hostId: 'host_1', ownerOfHost: unused, hostsFor: unused, onDownHost: unused,
    forwarder, trustProxy: false, publicHost: 'api.example.com',
  };
  const lines: LogLine[] = [];
  const front = forwardFront({ routing, ops: ALL_OPS, principalFromApiKey: async (k) => (k === 'sk_good' ? principal : null), log: (l) => lines.push(l) });
  // The app: answers 299 with the body it read, so a request it got (and with what) shows.
  let appCalls = 0;
  const server = createHttpServer(async (req) => {
    appCalls++;
    return new Response(`app:${req.method === 'GET' ? '' : await req.text()}`, { status: 299 });
  }, null, { front });
  const port = await listen(server, 0, '127.0.0.1');
  t.teardown(() => new Promise<void>((r) => {
    server.close(() => r());
    server.closeAllConnections();
  }));
  const send = (method: string, path: string, o: { key?: string; cookie?: string; body?: string; chunked?: boolean } = {}) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const headers: Record<string, string> = {};
      if (o.key) headers.authorization = `Bearer ${o.key}`;
      if (o.cookie) headers.cookie = o.cookie;
      if (o.body !== undefined && !o.chunked) headers['content-length'] = String(Buffer.byteLength(o.body));
      const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      });
      req.on('error', reject);
      if (o.body !== undefined) req.write(o.body);
      req.end();
    });
  const move = `/v1/machines/${M}/mouse/move`;
  const body = '{"x":10,"y":20}';

  t.same(await send('POST', move, { key: 'sk_good', body }), { status: 299, text: `app:${body}` }, 'no remembered driver: the app');
  owners.set(M, owner);
  t.same(await send('POST', move, { key: 'sk_good', body }), { status: 200, text: 'forwarded' }, 'remembered, a valid key: forwarded here');
  t.equal(seen.length, 1);
  t.equal(seen[0]!.body, body, 'with the body whole');
  t.match(seen[0]!.call, { target: owner, authorization: 'drop', assertion: { on_behalf_of: { kind: 'tenant', api_key_id: 'key_1', org_id: 'org_1', permissions: ['machines:control'] }, client: { host: `127.0.0.1:${port}`, proto: 'http', ip: '127.0.0.1' } } });
  t.match(lines.at(-1), { event: 'request', operation: 'machines.mouse_move', org: 'org_1', machine_id: M, method: 'POST', status: 200, forwarded_to: owner.processId, via: 'front' });
  t.notOk(JSON.stringify(lines).includes('sk_good'), 'the key is in no log line');

  t.same(await send('POST', move, { key: 'sk_bad', body }), { status: 299, text: `app:${body}` }, 'a key that is not valid: the app (it answers 401)');
  t.same(await send('POST', move, { cookie: 'session=abc', body }), { status: 299, text: `app:${body}` }, 'a cookie: the app (its Origin rule)');
  t.same(await send('POST', move, { key: 'sk_good', body, chunked: true }), { status: 299, text: `app:${body}` }, 'a chunked body: the app');
  const big = JSON.stringify({ x: 1, pad: 'x'.repeat(64 * 1024) });
  t.same(await send('POST', move, { key: 'sk_good', body: big }), { status: 299, text: `app:${big}` }, 'a body over 64 KiB: the app');
  t.same(await send('GET', `/v1/machines/${M}`, { key: 'sk_good' }), { status: 299, text: 'app:' }, 'an operation served anywhere: the app');
  t.equal(seen.length, 1, 'none of those was forwarded here');

  // A body sent after its headers: the forward begins before it is all there (it is built and signed meanwhile).
  let began = false;
  const split = new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: move, agent: false, headers: { authorization: 'Bearer sk_good', 'content-length': String(body.length) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.write(body.slice(0, 5));
    // The rest once the forward began, or after two seconds without it (then the check below fails).
    const rest = (waited: number) => {
      if (attempts() < 2 && waited < 2000) return void setTimeout(() => rest(waited + 5), 5);
      began = attempts() === 2;
      req.end(body.slice(5));
    };
    rest(0);
  });
  t.same(await split, { status: 200, text: 'forwarded' }, 'a body still arriving: forwarded');
  t.ok(began, 'the forward began before the body was all there');
  t.equal(seen.at(-1)!.body, body, 'with the body whole');

  answer = 'refused';
  t.same(await send('POST', move, { key: 'sk_good', body }), { status: 299, text: `app:${body}` }, 'the remembered driver refused: the app, with the body held here');
  t.equal(seen.length, 3);
  t.equal(owners.get(M), null, 'and the driver is forgotten');
  t.same(await send('GET', `/v1/machines/${M}/screenshot`, { key: 'sk_good' }), { status: 299, text: 'app:' }, 'so the next request goes to the app too');
  t.equal(seen.length, 3);

  // The caller leaves halfway through its body and the driver refuses: there is no whole body to hand the app and no
  // one to answer, so nothing reaches the app and the server serves on.
  owners.set(M, owner);
  const appBefore = appCalls;
  await new Promise<void>((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: move, agent: false, headers: { authorization: 'Bearer sk_good', 'content-length': String(body.length) } });
    req.on('error', () => resolve());
    req.write(body.slice(0, 5));
    const leave = (waited: number) => {
      if (attempts() < 4 && waited < 2000) return void setTimeout(() => leave(waited + 5), 5);
      req.destroy();
    };
    leave(0);
  });
  for (let i = 0; i < 200 && seen.length < 4; i++) await new Promise((r) => setTimeout(r, 5));
  t.equal(seen.length, 4, 'the forward began and was refused');
  t.equal(seen.at(-1)!.body, body.slice(0, 5), 'with only the half that came');
  t.equal(owners.get(M), null, 'the driver is forgotten');
  await new Promise((r) => setTimeout(r, 50));
  t.equal(appCalls, appBefore, 'the app never saw the half body');
  t.same(await send('POST', move, { key: 'sk_good', body }), { status: 299, text: `app:${body}` }, 'and the next request is served');
});

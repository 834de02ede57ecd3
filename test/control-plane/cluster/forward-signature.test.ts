/**
 * The internal listener serves only what another process of the deployment signed for it, now, once
 * (control-plane/src/cluster/forward/listener.ts, signature.ts; issue 24 item 5, issue 25 item 3): a request signed
 * with the deployment key is served with the principal rebuilt from its assertion; a wrong key, a stale timestamp,
 * a replayed nonce, a tampered path or assertion, a request signed for another process, any missing header, and an
 * unsigned upgrade are each refused with the same 401 envelope and nothing served. The nonce cache is bounded.
 */
import { inspect } from 'node:util';
import net from 'node:net';
import t, { type Test } from 'tap';
import { encodeAssertion } from '../../../control-plane/src/cluster/forward/assertion.js';
import { DeploymentKey } from '../../../control-plane/src/cluster/forward/key.js';
import type { Forwarded } from '../../../control-plane/src/cluster/forward/listener.js';
import { ReplayCache } from '../../../control-plane/src/cluster/forward/replay.js';
import { FORWARD_HEADERS, signRequest } from '../../../control-plane/src/cluster/forward/signature.js';
import { call, KEY, OWNER_ID, startOwner, TENANT } from '../../helpers/forward-rig.js';

const REFUSED = { code: 'unauthenticated', message: 'Unauthenticated.', details: [], quota: null };

/** The owner's clock: tests move it instead of waiting. */
let clock = 1_800_000_000_000;

async function rig(t: Test) {
  const served: Array<{ method?: string; url?: string; f: Forwarded }> = [];
  const owner = await startOwner(t, {
    request: (req, res, f) => {
      served.push({ method: req.method, url: req.url, f });
      res.end('served');
    },
    upgrade: (req, socket, _head, f) => {
      served.push({ method: req.method, url: req.url, f });
      socket.end('HTTP/1.1 500 Unexpected\r\nConnection: close\r\n\r\n');
    },
  }, { now: () => clock });
  const signed = (o: { method?: string; path?: string; key?: DeploymentKey; target?: string; now?: number } = {}) =>
    signRequest(o.key ?? KEY, { method: o.method ?? 'GET', path: o.path ?? '/v1/machines/mch_1', sender: 'cp-edge', target: o.target ?? OWNER_ID, assertion: TENANT, now: o.now ?? clock });
  return { owner, served, signed };
}

async function refused(t: Test, port: number, o: Parameters<typeof call>[1]) {
  const a = await call(port, o);
  t.equal(a.status, 401);
  const body = JSON.parse(a.body.toString());
  t.match(body.error.request_id, /^req_[0-9a-z]{24}$/);
  t.same({ ...body.error, request_id: undefined }, { ...REFUSED, request_id: undefined });
}

t.test('a request signed for this process is served, acting for the asserted principal only', async (t) => {
  const { owner, served, signed } = await rig(t);
  const a = await call(owner.port, { path: '/v1/machines/mch_1', headers: signed() });
  t.equal(a.status, 200);
  t.equal(a.body.toString(), 'served');
  t.equal(served.length, 1);
  const f = served[0]!.f;
  t.same(f.on_behalf_of.kind === 'tenant' ? { ...f.on_behalf_of.principal, permissions: [...f.on_behalf_of.principal.permissions] } : null, {
    kind: 'api_key', user_id: 'usr_alice', auth_session_id: null, api_key_id: 'key_k1', org_id: 'org_acme', role: 'member',
    scopes: ['machines:read', 'machines:control'], permissions: ['machines:control'], via_cookie: false,
  });
  t.same({ sender: f.sender, request_id: f.request_id, client: f.client }, { sender: 'cp-edge', request_id: 'req_r1', client: { ip: '203.0.113.7', proto: 'https', host: 'api.example' } });
  t.same(owner.logs, []);
});

t.test('every forgery and accident is the same 401, and nothing is served', async (t) => {
  const { owner, served, signed } = await rig(t);
  const other = new DeploymentKey(Buffer.alloc(32, 7));
  const forged = { ...TENANT, on_behalf_of: { ...TENANT.on_behalf_of, org_id: 'org_victim' } };
  const cases: Array<[string, Parameters<typeof call>[1]]> = [
    ['wrong key', { path: '/v1/machines/mch_1', headers: signed({ key: other }) }],
    ['stale timestamp (31 s old)', { path: '/v1/machines/mch_1', headers: signed({ now: clock - 31_000 }) }],
    ['timestamp 31 s ahead', { path: '/v1/machines/mch_1', headers: signed({ now: clock + 31_000 }) }],
    ['tampered path', { path: '/v1/machines/mch_2', headers: signed({ path: '/v1/machines/mch_1' }) }],
    ['tampered query', { path: '/v1/machines/mch_1?x=1', headers: signed({ path: '/v1/machines/mch_1' }) }],
    ['tampered method', { method: 'DELETE', path: '/v1/machines/mch_1', headers: signed({ method: 'GET' }) }],
    ['tampered assertion', { path: '/v1/machines/mch_1', headers: { ...signed(), [FORWARD_HEADERS.assertion]: encodeAssertion(forged) } }],
    ['signed for another process', { path: '/v1/machines/mch_1', headers: signed({ target: 'cp-other' }) }],
    ['no channel headers at all', { path: '/v1/machines/mch_1', headers: { authorization: 'Bearer sk_test_key' } }],
    ...Object.values(FORWARD_HEADERS).map((name): [string, Parameters<typeof call>[1]] => {
      const h: Record<string, string> = signed();
      delete h[name];
      return [`missing ${name}`, { path: '/v1/machines/mch_1', headers: h }];
    }),
    ['a header twice', { path: '/v1/machines/mch_1', headers: ['Host', 'x', ...Object.entries(signed()).flat(), FORWARD_HEADERS.sender, 'cp-edge'] }],
  ];
  for (const [name, o] of cases) await t.test(name, (t) => refused(t, owner.port, o));
  t.equal(served.length, 0);
  t.same(owner.logs.map((l) => l.reason), [
    'bad_signature', 'stale_timestamp', 'stale_timestamp', 'bad_signature', 'bad_signature', 'bad_signature', 'bad_signature', 'wrong_target',
    'missing_header', 'missing_header', 'missing_header', 'missing_header', 'missing_header', 'missing_header', 'missing_header', 'malformed_header',
  ]);
  t.notOk(JSON.stringify(owner.logs).includes('sk_test_key'), 'no header value is logged');
});

t.test('a replayed nonce is refused, within the window and at its edge', async (t) => {
  const { owner, served, signed } = await rig(t);
  const h = signed();
  t.equal((await call(owner.port, { path: '/v1/machines/mch_1', headers: h })).status, 200);
  await refused(t, owner.port, { path: '/v1/machines/mch_1', headers: h });
  clock += 30_000;
  await refused(t, owner.port, { path: '/v1/machines/mch_1', headers: h });
  clock += 1;
  await refused(t, owner.port, { path: '/v1/machines/mch_1', headers: h });
  t.equal(served.length, 1);
  t.same(owner.logs.map((l) => l.reason), ['replayed_nonce', 'replayed_nonce', 'stale_timestamp']);
});

t.test('an unsigned or forged upgrade is refused before anything is served', async (t) => {
  const { owner, served, signed } = await rig(t);
  for (const headers of [{}, { ...signed({ key: new DeploymentKey(Buffer.alloc(32, 9)) }) }]) {
    const raw = await new Promise<string>((resolve) => {
      const s = net.connect(owner.port, '127.0.0.1');
      const lines = ['GET /v1/machines/mch_1/screen HTTP/1.1', 'Host: x', 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
      let got = '';
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got));
      s.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    t.match(raw, /^HTTP\/1\.1 401 Unauthorized\r\n/);
    const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));
    t.same({ ...body.error, request_id: undefined }, { ...REFUSED, request_id: undefined });
  }
  t.equal(served.length, 0);
  t.same(owner.logs.map((l) => l.reason), ['missing_header', 'bad_signature']);
});

t.test('the nonce cache is bounded in size (full: refused) and in time (kept 2 windows)', async (t) => {
  const cache = new ReplayCache({ windowMs: 30_000, maxEntries: 2 });
  t.same([cache.admit('a', 0), cache.admit('b', 1), cache.admit('c', 2), cache.admit('a', 59_999)], ['fresh', 'fresh', 'full', 'replayed']);
  t.same([cache.admit('a', 60_000), cache.size], ['fresh', 2]);
  t.same([cache.admit('c', 60_001), cache.size], ['fresh', 2]);
  t.same([cache.admit('d', 60_002)], ['full']);

  const { owner, served, signed } = await rig(t);
  void owner;
  const small = await startOwner(t, { request: (_q, res, f) => { served.push({ f }); res.end(); }, upgrade: () => {} }, { now: () => clock, maxNonces: 1 });
  t.equal((await call(small.port, { path: '/v1/machines/mch_1', headers: signed() })).status, 200);
  await refused(t, small.port, { path: '/v1/machines/mch_1', headers: signed() });
  t.same(small.logs.map((l) => l.reason), ['nonce_cache_full']);
  t.equal(served.length, 1);
});

t.test('the key never shows when printed or serialised', async (t) => {
  t.equal(JSON.stringify({ key: KEY }), '{"key":"[deployment key]"}');
  t.notOk(inspect(KEY).includes('a1a1'));
  t.throws(() => new DeploymentKey(Buffer.alloc(31)), RangeError);
});

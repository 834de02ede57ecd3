/**
 * No tenant credential crosses the internal channel (control-plane/src/cluster/forward/headers.ts; issue 24 item 5,
 * issue 25 item 3): through a real forwarder and listener, the owner's handler receives literally the headers
 * pinned here — no Authorization, no session or preview cookie, no forged channel or proxy header — while the
 * caller's other headers and a guest app's own cookie pass; for a preview, the app's own Authorization passes
 * when the arriving process says it was not the preview's secret. The receiving side strips the same credentials
 * itself, so a signed request that carries one still reaches the handler without it. The owner's answer comes
 * back with status and headers (repeats kept) minus hop-by-hop ones.
 */
import t, { type Test } from 'tap';
import type { Assertion } from '../../../control-plane/src/cluster/forward/assertion.js';
import type { Forwarded } from '../../../control-plane/src/cluster/forward/listener.js';
import { signRequest } from '../../../control-plane/src/cluster/forward/signature.js';
import { call, KEY, OWNER_ID, startEdge, startOwner, TENANT, wiretap } from '../../helpers/forward-rig.js';

const PREVIEW: Assertion = {
  on_behalf_of: { kind: 'preview', preview_id: 'prv_p1' },
  request_id: 'req_r2',
  client: { ip: '198.51.100.4', proto: 'https', host: 'prv-p1.preview.example' },
};

/** Values of ours in CALLER_HEADERS: none may cross the wire between the two processes. */
const OURS = ['sk_live_secretkey', 'sess-token', 'prev-token', 'host-token', '6.6.6.6', 'forged'];

/** What a tenant's client sends: credentials of ours, a guest cookie, forgeries of the channel and of a proxy. */
const CALLER_HEADERS = [
  'Host', 'api.example',
  'Authorization', 'Bearer sk_live_secretkey',
  'Cookie', 'computer_session=sess-token; theme=dark',
  'Cookie', 'computer_preview=prev-token; __Host-computer_session=host-token',
  'X-Forwarded-For', '6.6.6.6',
  'Forwarded', 'for=6.6.6.6',
  'X-Computer-Forward-Assertion', 'forged',
  'X-Custom', 'one',
  'X-Custom', 'two',
  'Accept', 'application/json',
  'Connection', 'keep-alive, X-Hop',
  'X-Hop', 'hop',
  'Keep-Alive', 'timeout=5',
];

async function rig(t: Test, assertion: Assertion, authorization: 'drop' | 'keep') {
  const seen: Array<{ raw: string[]; headers: Record<string, unknown>; f: Forwarded }> = [];
  const owner = await startOwner(t, {
    request: (req, res, f) => {
      seen.push({ raw: [...req.rawHeaders], headers: { ...req.headers }, f });
      res.writeHead(201, ['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'X-Owner', 'yes', 'Connection', 'X-Owner-Hop', 'X-Owner-Hop', 'hop']);
      res.end('made');
    },
    upgrade: () => {},
  });
  const wire = await wiretap(t, owner.port);
  const edge = await startEdge(t, wire.address, { assertion, authorization });
  return { owner, edge, seen, wire };
}

t.test('a /v1 caller\'s credentials never reach the owner; the answer comes back whole', async (t) => {
  const { edge, seen, wire } = await rig(t, TENANT, 'drop');
  const a = await call(edge.port, { path: '/v1/machines/mch_1/files?path=%2Ftmp', headers: CALLER_HEADERS });
  t.same(OURS.filter((v) => wire.sent().includes(v)), [], 'nothing of ours on the wire');
  t.match(wire.sent(), /^GET \/v1\/machines\/mch_1\/files\?path=%2Ftmp HTTP\/1\.1\r\n/);
  t.equal(a.status, 201);
  t.equal(a.body.toString(), 'made');
  t.same(a.headers['set-cookie'], ['a=1', 'b=2']);
  t.equal(a.headers['x-owner'], 'yes');
  t.equal(a.headers['x-owner-hop'], undefined);
  t.equal(seen.length, 1);
  t.same(seen[0]!.raw, [
    'Cookie', 'theme=dark',
    'X-Custom', 'one',
    'X-Custom', 'two',
    'Accept', 'application/json',
    'Connection', 'keep-alive',
    'Host', 'api.example',
  ]);
  t.same(seen[0]!.headers, { cookie: 'theme=dark', 'x-custom': 'one, two', accept: 'application/json', connection: 'keep-alive', host: 'api.example' });
  t.equal(seen[0]!.f.on_behalf_of.kind, 'tenant');
});

t.test('a preview visitor: the app\'s own Authorization and cookies pass, ours do not', async (t) => {
  const { edge, seen, wire } = await rig(t, PREVIEW, 'keep');
  const headers = CALLER_HEADERS.map((v) => (v === 'Bearer sk_live_secretkey' ? 'Basic YXBwOnB3' : v));
  t.equal((await call(edge.port, { path: '/app?token=kept-for-the-app', headers })).status, 201);
  t.same(OURS.filter((v) => wire.sent().includes(v)), [], 'nothing of ours on the wire');
  t.same(seen[0]!.raw, [
    'Authorization', 'Basic YXBwOnB3',
    'Cookie', 'theme=dark',
    'X-Custom', 'one',
    'X-Custom', 'two',
    'Accept', 'application/json',
    'Connection', 'keep-alive',
    'Host', 'prv-p1.preview.example',
  ]);
  t.same(seen[0]!.f, { sender: 'cp-edge', request_id: 'req_r2', client: PREVIEW.client, on_behalf_of: { kind: 'preview', preview_id: 'prv_p1' } });
});

t.test('a preview whose secret was the Authorization header: it is dropped', async (t) => {
  const { edge, seen, wire } = await rig(t, PREVIEW, 'drop');
  t.equal((await call(edge.port, { path: '/', headers: CALLER_HEADERS })).status, 201);
  t.same(OURS.filter((v) => wire.sent().includes(v)), [], 'nothing of ours on the wire');
  t.same(seen[0]!.raw.filter((_, i) => i % 2 === 0), ['Cookie', 'X-Custom', 'X-Custom', 'Accept', 'Connection', 'Host']);
});

t.test('the receiving side strips our credentials itself, even from a signed request', async (t) => {
  const { owner, seen } = await rig(t, TENANT, 'drop');
  const signed = signRequest(KEY, { method: 'GET', path: '/v1/machines/mch_1', sender: 'cp-edge', target: OWNER_ID, assertion: TENANT, now: Date.now() });
  const a = await call(owner.port, {
    path: '/v1/machines/mch_1',
    headers: ['Host', 'elsewhere.example', 'Authorization', 'Bearer sk_live_secretkey', 'Cookie', 'computer_session=sess-token', 'X-Forwarded-For', '6.6.6.6', ...Object.entries(signed).flat()],
  });
  t.equal(a.status, 201);
  t.same(seen[0]!.raw, ['Connection', 'close', 'Host', 'api.example']);
  t.same(seen[0]!.headers, { connection: 'close', host: 'api.example' });
});

/**
 * The principal assertion's text (control-plane/src/cluster/forward/assertion.ts): what the sender writes, pinned
 * literally (keys sorted, no spaces), with a principal's part made once and kept; and what the receiver accepts, each
 * `on_behalf_of` checked against the schema once per text and kept frozen, never handed out to be changed.
 */
import t from 'tap';
import { decodeAssertion, encodeAssertion, principalOf, tenantAssertion, type SignedAssertion } from '../../../control-plane/src/cluster/forward/assertion.js';
import { tenantCall } from '../../../control-plane/src/cluster/forward/tenant-call.js';
import type { OrgPrincipal } from '../../../control-plane/src/context.js';

const principal = (): OrgPrincipal => ({
  kind: 'api_key', user_id: 'usr_alice', auth_session_id: null, api_key_id: 'key_k1', org_id: 'org_acme', role: 'member',
  scopes: ['machines:read', 'machines:control'], permissions: new Set(['machines:create', 'machines:control']), via_cookie: false,
});
const client = { ip: '203.0.113.7', proto: 'https', host: 'api.example' } as const;
const text = (value: string) => Buffer.from(value, 'base64url').toString('utf8');
const b64 = (json: string) => Buffer.from(json, 'utf8').toString('base64url');

const TENANT_PART = '{"api_key_id":"key_k1","auth_session_id":null,"kind":"tenant","org_id":"org_acme","permissions":["machines:control","machines:create"],"principal_kind":"api_key","role":"member","scopes":["machines:read","machines:control"],"user_id":"usr_alice","via_cookie":false}';

t.test('the sender writes one canonical text, a principal\'s part made once', async (t) => {
  const p = principal();
  const a = tenantAssertion(p);
  t.equal(tenantAssertion(p), a, 'the same principal object: the same assertion');
  t.ok(Object.isFrozen(a) && Object.isFrozen(a.permissions) && Object.isFrozen(a.scopes), 'frozen, so its kept text cannot go stale');
  t.equal(text(encodeAssertion({ on_behalf_of: a, request_id: 'req_r1', client })),
    `{"client":{"host":"api.example","ip":"203.0.113.7","proto":"https"},"on_behalf_of":${TENANT_PART},"request_id":"req_r1"}`);
  t.equal(text(encodeAssertion({ on_behalf_of: a, request_id: 'req_r2', client })),
    `{"client":{"host":"api.example","ip":"203.0.113.7","proto":"https"},"on_behalf_of":${TENANT_PART},"request_id":"req_r2"}`, 'another request: only its id differs');
  t.equal(text(encodeAssertion({ on_behalf_of: { ...a }, request_id: 'req_r1', client })),
    `{"client":{"host":"api.example","ip":"203.0.113.7","proto":"https"},"on_behalf_of":${TENANT_PART},"request_id":"req_r1"}`, 'an equal part not made here: the same text');
  t.equal(text(encodeAssertion({ on_behalf_of: { kind: 'preview', preview_id: 'prv_p1' }, request_id: 'req_r1', client })),
    '{"client":{"host":"api.example","ip":"203.0.113.7","proto":"https"},"on_behalf_of":{"kind":"preview","preview_id":"prv_p1"},"request_id":"req_r1"}');
  t.equal(text(encodeAssertion({ on_behalf_of: { kind: 'host', host_id: 'host_h1' }, request_id: 'req_r1' })),
    '{"on_behalf_of":{"host_id":"host_h1","kind":"host"},"request_id":"req_r1"}', 'a host call: no client');
});

t.test('the receiver checks each part against the schema, and keeps only what held', async (t) => {
  const clientJson = '{"host":"api.example","ip":"203.0.113.7","proto":"https"}';
  const tenant = (part: string, id = 'req_r1') => b64(`{"client":${clientJson},"on_behalf_of":${part},"request_id":"${id}"}`);

  const first = decodeAssertion(tenant(TENANT_PART));
  const again = decodeAssertion(tenant(TENANT_PART, 'req_r2'));
  t.match(first, { request_id: 'req_r1', client, on_behalf_of: { kind: 'tenant', org_id: 'org_acme', permissions: ['machines:control', 'machines:create'] } });
  t.equal(again?.request_id, 'req_r2');
  t.equal(again?.on_behalf_of, first?.on_behalf_of, 'the same part\'s text: the part checked once, kept');
  t.ok(Object.isFrozen(first?.on_behalf_of), 'kept frozen');
  const onBehalf = first?.on_behalf_of;
  if (onBehalf?.kind !== 'tenant') throw new Error('a tenant part');
  t.throws(() => (onBehalf.permissions as string[]).push('machines:delete'), TypeError, 'its lists cannot be added to');
  const p = principalOf(onBehalf);
  p.scopes?.push('machines:write');
  t.same(onBehalf.scopes, ['machines:read', 'machines:control'], 'a principal rebuilt from it has lists of its own');

  const reordered = '{"via_cookie":false,"user_id":"usr_alice","scopes":["machines:read","machines:control"],"role":"member","principal_kind":"api_key","permissions":["machines:control","machines:create"],"org_id":"org_acme","kind":"tenant","auth_session_id":null,"api_key_id":"key_k1"}';
  t.match(decodeAssertion(tenant(reordered)), { on_behalf_of: { org_id: 'org_acme' } }, 'any key order a signer wrote is read (the signature is what vouches)');

  const refusedParts: Array<[string, string]> = [
    ['an unknown permission', TENANT_PART.replace('"machines:create"]', '"machines:everything"]')],
    ['a field too many', TENANT_PART.replace('"via_cookie":false', '"via_cookie":false,"admin":true')],
    ['a field missing', TENANT_PART.replace(',"via_cookie":false', '')],
    ['an org id of another shape', TENANT_PART.replace('"org_acme"', '"acme"')],
    ['an unknown kind', '{"kind":"root"}'],
    ['not an object', '"tenant"'],
  ];
  for (const [why, part] of refusedParts) {
    t.equal(decodeAssertion(tenant(part)), null, why);
    t.equal(decodeAssertion(tenant(part)), null, `${why}, again (a refusal is not kept as a pass)`);
  }

  const host = '{"host_id":"host_h1","kind":"host"}';
  t.same(decodeAssertion(b64(`{"on_behalf_of":${host},"request_id":"req_r1"}`)), { on_behalf_of: { kind: 'host', host_id: 'host_h1' }, request_id: 'req_r1' });
  const refused: Array<[string, string]> = [
    ['a host call with a client', `{"client":${clientJson},"on_behalf_of":${host},"request_id":"req_r1"}`],
    ['a tenant without a client', `{"on_behalf_of":${TENANT_PART},"request_id":"req_r1"}`],
    ['a field beside the three', `{"client":${clientJson},"extra":1,"on_behalf_of":${TENANT_PART},"request_id":"req_r1"}`],
    ['a request id of another shape', `{"client":${clientJson},"on_behalf_of":${TENANT_PART},"request_id":"r1"}`],
    ['a client host with a space', `{"client":{"host":"a b","ip":"203.0.113.7","proto":"https"},"on_behalf_of":${TENANT_PART},"request_id":"req_r1"}`],
    ['no on_behalf_of', `{"client":${clientJson},"request_id":"req_r1"}`],
    ['not JSON', '{"client":'],
  ];
  for (const [why, json] of refused) t.equal(decodeAssertion(b64(json)), null, why);
  t.equal(decodeAssertion('not base64url!'), null, 'not base64url');
});

t.test('every kind written is read back as it was', async (t) => {
  const all: SignedAssertion[] = [
    { on_behalf_of: tenantAssertion(principal()), request_id: 'req_r1', client },
    { on_behalf_of: { kind: 'preview', preview_id: 'prv_p1' }, request_id: 'req_r2', client },
    { on_behalf_of: { kind: 'host', host_id: 'host_h1' }, request_id: 'req_r3' },
  ];
  for (const a of all) t.same(decodeAssertion(encodeAssertion(a)), a, a.on_behalf_of.kind);
});

t.test('the sender asserts a caller\'s Host and address only in the forms the receiver accepts', async (t) => {
  const target = { kind: 'remote', processId: 'cp-1', address: 'http://127.0.0.1:1' } as const;
  const client = (host: string | undefined, ip: string) =>
    tenantCall(target, { principal: principal(), requestId: 'req_r1', host, ip, proto: 'http' }, 'api.example.com').assertion.client;
  const cases: Array<[string | undefined, string, { host: string; ip: string }]> = [
    ['machines.example:8080', '203.0.113.7', { host: 'machines.example:8080', ip: '203.0.113.7' }],
    ['[::1]:8080', '::1', { host: '[::1]:8080', ip: '::1' }],
    [undefined, '203.0.113.7', { host: 'api.example.com', ip: '203.0.113.7' }],
    ['a b', '203.0.113.7', { host: 'api.example.com', ip: '203.0.113.7' }],
    ['', '203.0.113.7', { host: 'api.example.com', ip: '203.0.113.7' }],
    ['h'.repeat(255), '203.0.113.7', { host: 'h'.repeat(255), ip: '203.0.113.7' }],
    ['h'.repeat(256), '203.0.113.7', { host: 'api.example.com', ip: '203.0.113.7' }],
    ['api.example', 'a'.repeat(64), { host: 'api.example', ip: 'a'.repeat(64) }],
    ['api.example', 'a'.repeat(65), { host: 'api.example', ip: 'unknown' }],
    ['api.example', '', { host: 'api.example', ip: 'unknown' }],
  ];
  for (const [host, ip, want] of cases) {
    const got = client(host, ip);
    t.same({ host: got.host, ip: got.ip }, want, `${host?.slice(0, 20)} / ${ip.slice(0, 20)}`);
    t.not(decodeAssertion(encodeAssertion({ on_behalf_of: { kind: 'preview', preview_id: 'prv_p1' }, request_id: 'req_r1', client: got })), null, 'and the receiver reads it');
  }
});

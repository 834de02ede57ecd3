import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { createApp } from '../../control-plane/src/app.js';
import { defineOp } from '../../control-plane/src/api/op.js';
import { IDENTITY_OPS } from '../../control-plane/src/api/v1/index.js';
import { assertEnvelope, makeRig, PUBLIC_ORIGIN } from '../helpers/control-plane.js';
import { TEST_ENGINE } from '../helpers/rig-db.js';

t.test('signup, login, me, sessions, logout', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const email = 'Alice@Example.com';
  const password = 'a long enough password';
  const s = await rig.call('POST', '/v1/auth/signup', { body: { email, password, name: 'Alice' } });
  t.equal(s.status, 201);
  const setCookie = s.headers.get('set-cookie')!;
  t.match(setCookie, /^computer_session=[0-9A-Za-z]{43}; /);
  t.match(setCookie, /HttpOnly/);
  t.match(setCookie, /SameSite=Lax/);
  t.match(setCookie, /Path=\//);
  t.match(setCookie, /Max-Age=1209600/);
  t.notMatch(setCookie, /Secure/, 'plain http base URL: no Secure flag');
  const cookie = setCookie.split(';')[0]!;

  const me = await rig.call('GET', '/v1/auth/me', { cookie });
  t.equal(me.status, 200);
  t.equal(me.json.user.email, 'alice@example.com', 'e-mail normalised');
  t.equal(me.json.organization.id, s.json.organization_id);
  t.equal(me.json.organization.personal, true);
  t.equal(me.json.organization.role, 'owner');
  t.equal(me.json.principal.type, 'user');
  t.equal(me.json.organizations.length, 1);

  const dup = await rig.call('POST', '/v1/auth/signup', { body: { email: 'alice@example.com', password, name: 'Again' } });
  assertEnvelope(t, dup, 'conflict', 409);

  const bad = await rig.call('POST', '/v1/auth/login', { body: { email, password: 'wrong password!' } });
  assertEnvelope(t, bad, 'unauthenticated', 401);
  const nobody = await rig.call('POST', '/v1/auth/login', { body: { email: 'nobody@example.com', password } });
  assertEnvelope(t, nobody, 'unauthenticated', 401);
  t.equal(nobody.json.error.message, bad.json.error.message, 'unknown address and wrong password look alike');

  const l1 = await rig.call('POST', '/v1/auth/login', { body: { email: 'ALICE@example.com ', password } });
  t.equal(l1.status, 200);
  const c1 = l1.headers.get('set-cookie')!.split(';')[0]!;
  const l2 = await rig.call('POST', '/v1/auth/login', { body: { email, password } });
  const c2 = l2.headers.get('set-cookie')!.split(';')[0]!;

  const list = await rig.call('GET', '/v1/auth/sessions', { cookie: c1 });
  t.equal(list.status, 200);
  t.equal(list.json.data.length, 3, 'signup + two logins');
  t.equal(list.json.next_cursor, null);
  t.same(list.json.data.filter((x: any) => x.current).map((x: any) => x.id), [l1.json.auth_session_id]);
  for (const x of list.json.data) t.same(Object.keys(x).sort(), ['created_at', 'current', 'expires_at', 'id', 'last_used_at']);

  const page1 = await rig.call('GET', '/v1/auth/sessions?limit=2', { cookie: c1 });
  t.equal(page1.json.data.length, 2);
  t.type(page1.json.next_cursor, 'string');
  const page2 = await rig.call('GET', `/v1/auth/sessions?limit=2&cursor=${page1.json.next_cursor}`, { cookie: c1 });
  t.equal(page2.json.data.length, 1);
  t.equal(page2.json.next_cursor, null);
  t.same([...page1.json.data, ...page2.json.data].map((x: any) => x.id).sort(), list.json.data.map((x: any) => x.id).sort());
  assertEnvelope(t, await rig.call('GET', '/v1/auth/sessions?cursor=garbage', { cookie: c1 }), 'invalid_request', 400);
  const big = await rig.call('GET', '/v1/auth/sessions?limit=201', { cookie: c1 });
  assertEnvelope(t, big, 'invalid_request', 400);
  t.equal(big.json.error.details[0].field, 'limit');

  // Revoke session 2 from session 1.
  const del = await rig.call('DELETE', `/v1/auth/sessions/${l2.json.auth_session_id}`, { cookie: c1 });
  t.equal(del.status, 204);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { cookie: c2 }), 'unauthenticated', 401);
  assertEnvelope(t, await rig.call('DELETE', `/v1/auth/sessions/${l2.json.auth_session_id}`, { cookie: c1 }), 'not_found', 404);

  // Another user's session id is not found, never denied.
  const bob = await rig.user('bob');
  const bobSessions = await rig.call('GET', '/v1/auth/sessions', { cookie: bob.cookie });
  assertEnvelope(t, await rig.call('DELETE', `/v1/auth/sessions/${bobSessions.json.data[0].id}`, { cookie: c1 }), 'not_found', 404);
  t.equal((await rig.call('GET', '/v1/auth/me', { cookie: bob.cookie })).status, 200, 'bob untouched');

  // Logout ends only this session.
  const out = await rig.call('POST', '/v1/auth/logout', { cookie: c1 });
  t.equal(out.status, 204);
  t.match(out.headers.get('set-cookie')!, /computer_session=; .*Max-Age=0/);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { cookie: c1 }), 'unauthenticated', 401);
  t.equal((await rig.call('GET', '/v1/auth/me', { cookie })).status, 200, 'signup session still alive');

  // Sessions expire after 14 days.
  rig.clock.t += 14 * 24 * 3600 * 1000 + 1000;
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { cookie }), 'unauthenticated', 401);

  // Browser-session routes refuse API keys; garbage credentials are 401.
  const fresh = await rig.user('carol');
  await rig.subscribe(fresh.cookie);
  const key = (await rig.call('POST', '/v1/api-keys', { cookie: fresh.cookie, body: { name: 'k', scopes: [] } })).json.secret;
  assertEnvelope(t, await rig.call('GET', '/v1/auth/sessions', { key }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/auth/logout', { key }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', {}), 'unauthenticated', 401);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { cookie: 'computer_session=nope' }), 'unauthenticated', 401);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { authorization: 'Basic abc' }), 'unauthenticated', 401);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { key: 'sk_' + 'A'.repeat(40) }), 'unauthenticated', 401);
  // A bad key never falls back to a good cookie.
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { key: 'sk_bad', cookie: fresh.cookie }), 'unauthenticated', 401);
});

t.test('secure cookie behind https', async (t) => {
  const rig = await makeRig({ env: { PUBLIC_BASE_URL: 'https://computer.example' } });
  t.teardown(() => rig.close());
  const r = await rig.call('POST', '/v1/auth/signup', { body: { email: 's@example.com', password: 'a long enough password' } });
  t.equal(r.status, 201);
  t.match(r.headers.get('set-cookie')!, /; Secure/);
});

t.test('switch organization', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const a = await rig.user('a');
  const b = await rig.user('b');
  const co = await rig.call('POST', '/v1/billing/checkout', { cookie: b.cookie, body: { plan_id: 'developer', success_url: `${PUBLIC_ORIGIN}/ok` } });
  await rig.call('GET', new URL(co.json.url).pathname);
  const inv = await rig.call('POST', '/v1/invitations', { cookie: b.cookie, body: { email: a.email, role: 'member' } });
  t.equal((await rig.call('POST', '/v1/invitations/accept', { cookie: a.cookie, body: { token: inv.json.token } })).status, 200);
  const me1 = await rig.call('GET', '/v1/auth/me', { cookie: a.cookie });
  t.equal(me1.json.organization.id, a.orgId, 'accepting does not switch');
  t.equal(me1.json.organizations.length, 2);
  const sw = await rig.call('POST', '/v1/auth/switch-organization', { cookie: a.cookie, body: { organization_id: b.orgId } });
  t.equal(sw.status, 200);
  t.equal(sw.json.organization.id, b.orgId);
  t.equal(sw.json.organization.role, 'member');
  t.notOk(sw.json.permissions.includes('members:manage'));
  const me2 = await rig.call('GET', '/v1/auth/me', { cookie: a.cookie });
  t.equal(me2.json.organization.id, b.orgId, 'the session now acts in b');
  // A foreign organization looks like no organization at all.
  const c = await rig.user('c');
  assertEnvelope(t, await rig.call('POST', '/v1/auth/switch-organization', { cookie: a.cookie, body: { organization_id: c.orgId } }), 'not_found', 404);
  assertEnvelope(t, await rig.call('POST', '/v1/auth/switch-organization', { cookie: a.cookie, body: { organization_id: 'org_doesnotexist000000000000' } }), 'not_found', 404);
  // Removed from the active organization: the session falls back to another membership.
  const members = (await rig.call('GET', '/v1/members', { cookie: b.cookie })).json.data as any[];
  const am = members.find((m) => m.user_id === a.userId).id;
  t.equal((await rig.call('DELETE', `/v1/members/${am}`, { cookie: b.cookie })).status, 204);
  const me3 = await rig.call('GET', '/v1/auth/me', { cookie: a.cookie });
  t.equal(me3.json.organization.id, a.orgId);
  // An API key sees only its own organization.
  const key = (await rig.call('POST', '/v1/api-keys', { cookie: b.cookie, body: { name: 'k', scopes: ['machines:read'] } })).json.secret;
  const km = await rig.call('GET', '/v1/auth/me', { key });
  t.equal(km.json.principal.type, 'api_key');
  t.same(km.json.principal.scopes, ['machines:read']);
  t.same(km.json.organizations, []);
  t.same(km.json.permissions, []);
});

t.test('CSRF: cookie-authenticated writes need a recognised Origin', async (t) => {
  const rig = await makeRig({ env: { ALLOWED_ORIGINS: 'https://dash.example, http://localhost:3000' } });
  t.teardown(() => rig.close());
  const u = await rig.user('u');
  await rig.subscribe(u.cookie);
  const body = { name: 'k', scopes: [] };
  assertEnvelope(t, await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body, origin: null }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body, origin: 'https://evil.example' }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body, origin: 'http://cp.test.evil.example' }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/auth/logout', { cookie: u.cookie, origin: null }), 'permission_denied', 403);
  t.equal((await rig.call('GET', '/v1/auth/me', { cookie: u.cookie })).status, 200, 'still signed in: the refused logout did nothing');
  t.equal((await rig.call('GET', '/v1/api-keys', { cookie: u.cookie, origin: null })).status, 200, 'reads need no Origin');
  t.equal((await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body, origin: PUBLIC_ORIGIN })).status, 201);
  t.equal((await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body, origin: 'https://dash.example' })).status, 201);
  const k = await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body, origin: 'http://localhost:3000' });
  t.equal(k.status, 201);
  const keys = await rig.call('GET', '/v1/api-keys', { cookie: u.cookie });
  t.equal(keys.json.data.length, 3, 'only the recognised-origin writes created keys');
  // API keys are not subject to the Origin check.
  const byKey = await rig.call('DELETE', `/v1/api-keys/${k.json.id}`, { key: k.json.secret });
  t.equal(byKey.status, 403, 'key without api_keys:manage scope is refused by permission, not Origin');
  t.equal(byKey.json.error.code, 'permission_denied');
  const withKey = await rig.call('GET', '/v1/auth/me', { key: k.json.secret, origin: 'https://evil.example' });
  t.equal(withKey.status, 200);
  // Signup and login from a foreign browser origin are refused (login CSRF); no Origin (CLI, curl) is fine.
  assertEnvelope(t, await rig.call('POST', '/v1/auth/login', { body: { email: u.email, password: u.password }, origin: 'https://evil.example' }), 'permission_denied', 403);
  t.equal((await rig.call('POST', '/v1/auth/login', { body: { email: u.email, password: u.password }, origin: PUBLIC_ORIGIN })).status, 200);

  // CORS answers only the configured extra origins (a dashboard on another host sends its cookie).
  const pre = await rig.call('OPTIONS', '/v1/api-keys', { origin: 'https://dash.example', headers: { 'access-control-request-method': 'POST' } });
  t.equal(pre.status, 204);
  t.equal(pre.headers.get('access-control-allow-origin'), 'https://dash.example');
  t.equal(pre.headers.get('access-control-allow-credentials'), 'true');
  const evilPre = await rig.call('OPTIONS', '/v1/api-keys', { origin: 'https://evil.example', headers: { 'access-control-request-method': 'POST' } });
  t.equal(evilPre.headers.get('access-control-allow-origin'), null);
  const get = await rig.call('GET', '/v1/auth/me', { cookie: u.cookie, origin: 'https://dash.example' });
  t.equal(get.headers.get('access-control-allow-origin'), 'https://dash.example');
  t.match(get.headers.get('access-control-expose-headers'), /x-request-id/);
});

t.test('a user in no organization', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const a = await rig.user('a');
  const b = await rig.user('b');
  // b becomes a second owner of a's personal organization, then a leaves it: a now belongs nowhere.
  const co = await rig.call('POST', '/v1/billing/checkout', { cookie: a.cookie, body: { plan_id: 'pro', success_url: `${PUBLIC_ORIGIN}/x` } });
  await rig.call('GET', new URL(co.json.url).pathname);
  const inv = await rig.call('POST', '/v1/invitations', { cookie: a.cookie, body: { email: b.email, role: 'owner' } });
  t.equal((await rig.call('POST', '/v1/invitations/accept', { cookie: b.cookie, body: { token: inv.json.token } })).status, 200);
  const mine = (await rig.call('GET', '/v1/members', { cookie: a.cookie })).json.data.find((m: any) => m.user_id === a.userId).id;
  t.equal((await rig.call('DELETE', `/v1/members/${mine}`, { cookie: a.cookie })).status, 204);
  const me = await rig.call('GET', '/v1/auth/me', { cookie: a.cookie });
  t.equal(me.status, 200);
  t.equal(me.json.organization, null);
  t.same(me.json.permissions, []);
  t.same(me.json.organizations, []);
  assertEnvelope(t, await rig.call('GET', '/v1/members', { cookie: a.cookie }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('GET', '/v1/billing', { cookie: a.cookie }), 'permission_denied', 403);
  t.equal((await rig.call('GET', '/v1/auth/sessions', { cookie: a.cookie })).status, 200, 'session routes still work');
});

t.test('rate limits: signups per IP, failed logins per (e-mail, IP) with backoff', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const pw = 'a long enough password';
  for (let i = 0; i < 10; i++) {
    const r = await rig.call('POST', '/v1/auth/signup', { body: { email: `s${i}@example.com`, password: pw }, ip: '203.0.113.7' });
    t.equal(r.status, 201, `signup ${i + 1} of 10`);
  }
  const limited = await rig.call('POST', '/v1/auth/signup', { body: { email: 's10@example.com', password: pw }, ip: '203.0.113.7' });
  assertEnvelope(t, limited, 'rate_limited', 429);
  t.equal(limited.headers.get('retry-after'), '3600');
  t.equal((await rig.call('POST', '/v1/auth/login', { body: { email: 's10@example.com', password: pw } })).status, 401, 'the refused signup created nothing');
  t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: 's11@example.com', password: pw }, ip: '203.0.113.8' })).status, 201, 'another IP is unaffected');
  rig.clock.t += 30 * 60 * 1000;
  t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: 's12@example.com', password: pw }, ip: '203.0.113.7' })).headers.get('retry-after'), '1800');
  rig.clock.t += 30 * 60 * 1000;
  t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: 's13@example.com', password: pw }, ip: '203.0.113.7' })).status, 201, 'window over');

  // X-Forwarded-For is ignored unless TRUST_PROXY.
  for (let i = 0; i < 9; i++) await rig.call('POST', '/v1/auth/signup', { body: { email: `x${i}@example.com`, password: pw }, ip: '203.0.113.7' });
  const spoof = await rig.call('POST', '/v1/auth/signup', { body: { email: 'spoof@example.com', password: pw }, ip: '203.0.113.7', headers: { 'x-forwarded-for': '198.18.0.1' } });
  t.equal(spoof.status, 429, 'a forged X-Forwarded-For does not escape the limit');

  // Failed logins: per (e-mail, client IP) with exponential backoff (5 free, then 1 s, 2 s, 4 s…).
  const email = 's0@example.com';
  const login = (password: string, ip: string) => rig.call('POST', '/v1/auth/login', { body: { email, password }, ip });
  for (let i = 0; i < 5; i++) t.equal((await login('wrong password', '192.0.2.1')).status, 401, `failure ${i + 1}`);
  const slowed = await login(pw, '192.0.2.1');
  assertEnvelope(t, slowed, 'rate_limited', 429);
  t.equal(slowed.headers.get('retry-after'), '1', 'even the right password waits, 1 s after 5 failures');
  t.equal((await login(pw, '192.0.2.2')).status, 200, 'the same address from another IP is not slowed');
  t.equal((await rig.call('POST', '/v1/auth/login', { body: { email: 's1@example.com', password: pw }, ip: '192.0.2.1' })).status, 200, 'other addresses unaffected');
  rig.clock.t += 1000;
  t.equal((await login('wrong password', '192.0.2.1')).status, 401, 'after the wait: one more try');
  t.equal((await login(pw, '192.0.2.1')).headers.get('retry-after'), '2', 'then 2 s');
  rig.clock.t += 2000;
  t.equal((await login('wrong password', '192.0.2.1')).status, 401);
  t.equal((await login(pw, '192.0.2.1')).headers.get('retry-after'), '4', 'then 4 s');
  rig.clock.t += 4000;
  // A success clears the pair's counter: 5 free failures again.
  t.equal((await login(pw, '192.0.2.1')).status, 200);
  for (let i = 0; i < 5; i++) t.equal((await login('wrong password', '192.0.2.1')).status, 401, `after success, failure ${i + 1} is free`);
  t.equal((await login('wrong password', '192.0.2.1')).status, 429);
  rig.clock.t += 60 * 60 * 1000;
  t.equal((await login(pw, '192.0.2.1')).status, 200, 'forgotten an hour after the last failure');
  // Other routes are never rate-limited.
  const u = await rig.call('POST', '/v1/auth/login', { body: { email: 's1@example.com', password: pw } });
  const cookie = u.headers.get('set-cookie')!.split(';')[0]!;
  for (let i = 0; i < 50; i++) t.equal((await rig.call('GET', '/v1/auth/me', { cookie })).status, 200);
});

t.test('TRUST_PROXY takes the right-most X-Forwarded-For', async (t) => {
  const rig = await makeRig({ env: { TRUST_PROXY: 'true' } });
  t.teardown(() => rig.close());
  const pw = 'a long enough password';
  for (let i = 0; i < 10; i++) {
    t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: `p${i}@example.com`, password: pw }, ip: '10.0.0.1', headers: { 'x-forwarded-for': `198.18.0.${i}, 203.0.113.50` } })).status, 201);
  }
  const r = await rig.call('POST', '/v1/auth/signup', { body: { email: 'p10@example.com', password: pw }, ip: '10.0.0.1', headers: { 'x-forwarded-for': '198.18.0.99, 203.0.113.50' } });
  t.equal(r.status, 429, 'the proxy-appended address is the one limited');
  t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: 'p11@example.com', password: pw }, ip: '10.0.0.1', headers: { 'x-forwarded-for': '203.0.113.51' } })).status, 201);
});

t.test('API keys: format, shown once, hashed at rest, last_used_at, revoke', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const u = await rig.user('k');
  await rig.subscribe(u.cookie);
  const c = await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'ci', scopes: ['machines:write', 'machines:read'] } });
  t.equal(c.status, 201);
  const secret: string = c.json.secret;
  t.match(secret, /^sk_[0-9A-Za-z]{40}$/);
  t.equal(c.json.prefix, secret.slice(0, 12));
  t.equal(c.json.last_used_at, null);
  t.same(c.json.scopes, ['machines:write', 'machines:read']);
  t.equal(c.headers.get('cache-control'), 'no-store');

  const list = await rig.call('GET', '/v1/api-keys', { cookie: u.cookie });
  t.equal(list.json.data.length, 1);
  t.notOk('secret' in list.json.data[0], 'secret never on reads');
  t.notOk(JSON.stringify(list.json).includes(secret.slice(12)), 'no part of the secret beyond the prefix');

  rig.clock.t += 1000;
  t.equal((await rig.call('GET', '/v1/auth/me', { key: secret })).status, 200);
  const after = await rig.call('GET', '/v1/api-keys', { key: secret });
  t.equal(after.json.data[0].last_used_at, new Date(rig.clock.t).toISOString());

  // Stored only as a hash: the plaintext is in neither the database nor its WAL (the SQLite file's own bytes; on
  // PostgreSQL the rows, read back below, hold the hash only).
  if (TEST_ENGINE === 'sqlite') {
    const files = fs.readdirSync(rig.dir).filter((f) => f.startsWith('control-plane.sqlite'));
    t.ok(files.length >= 1);
    for (const f of files) t.notOk(fs.readFileSync(path.join(rig.dir, f)).includes(Buffer.from(secret)), `${f} holds no key plaintext`);
    t.notOk(fs.readFileSync(path.join(rig.dir, 'control-plane.sqlite')).includes(Buffer.from(u.password)), 'no password plaintext');
  }
  const stored = JSON.stringify(await rig.store.db.q().selectFrom('api_keys').selectAll().execute()) + JSON.stringify(await rig.store.db.q().selectFrom('users').selectAll().execute());
  t.notOk(stored.includes(secret), 'no key plaintext in the rows');
  t.notOk(stored.includes(u.password), 'no password plaintext in the rows');

  t.equal((await rig.call('DELETE', `/v1/api-keys/${c.json.id}`, { cookie: u.cookie })).status, 204);
  assertEnvelope(t, await rig.call('GET', '/v1/auth/me', { key: secret }), 'unauthenticated', 401);
  assertEnvelope(t, await rig.call('DELETE', `/v1/api-keys/${c.json.id}`, { cookie: u.cookie }), 'not_found', 404);
  t.equal((await rig.call('GET', '/v1/api-keys', { cookie: u.cookie })).json.data.length, 0);
});

t.test('errors: envelope, zod paths, unknown routes, unexpected failures, logging', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const boom = defineOp({
    name: 'test.boom',
    method: 'get',
    path: '/boom',
    auth: 'none',
    responses: { 204: 'empty' },
    handler: () => {
      throw new TypeError('cause-marker-7731');
    },
  });
  const logs: any[] = [];
  const app = createApp({ services: rig.services, log: (l) => logs.push(l), ops: [...IDENTITY_OPS, boom] });
  const r = await app.request('/v1/boom', {}, { clientIp: '192.0.2.1' });
  const text = await r.text();
  t.equal(r.status, 500);
  const e = JSON.parse(text).error;
  t.equal(e.code, 'internal_error');
  t.equal(e.request_id, r.headers.get('x-request-id'));
  t.notMatch(text, /cause-marker-7731|TypeError/, 'cause not sent');
  const ie = logs.find((l) => l.event === 'internal_error');
  t.match(ie.cause, /TypeError: cause-marker-7731/, 'cause logged');
  t.equal(ie.request_id, e.request_id);
  t.equal(ie.operation, 'test.boom');

  const u = await rig.user('z');
  const v = await rig.call('POST', '/v1/auth/signup', { body: { email: 'not-an-email', password: 'short', extra: 1 } });
  assertEnvelope(t, v, 'invalid_request', 400);
  const fields = v.json.error.details.map((d: any) => d.field).sort();
  t.same(fields, ['(body)', 'email', 'password']);
  for (const d of v.json.error.details) t.type(d.message, 'string');
  const nested = await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'x', scopes: ['machines:write', 'root:everything'] } });
  assertEnvelope(t, nested, 'invalid_request', 400);
  t.same(nested.json.error.details.map((d: any) => d.field), ['scopes.1'], 'dotted path with array index');
  const role = await rig.call('PATCH', '/v1/members/mem_x', { cookie: u.cookie, body: { role: 'god' } });
  assertEnvelope(t, role, 'invalid_request', 400);
  t.same(role.json.error.details.map((d: any) => d.field), ['role']);
  assertEnvelope(t, await rig.call('POST', '/v1/auth/login', { rawBody: '{"email":' }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', '/v1/auth/login', { rawBody: 'x'.repeat(300 * 1024) }), 'invalid_request', 400);
  const rep = await rig.call('GET', '/v1/members?limit=1&limit=2', { cookie: u.cookie });
  assertEnvelope(t, rep, 'invalid_request', 400);
  t.equal(rep.json.error.details[0].field, 'limit');

  for (const [m, p] of [['GET', '/nope'], ['GET', '/v1/nope'], ['GET', '/v2/plans'], ['PUT', '/v1/plans'], ['DELETE', '/v1/auth/me']]) {
    assertEnvelope(t, await rig.call(m!, p!), 'not_found', 404);
  }

  // Request log: id, operation, org, status, duration; never a secret, e-mail, cookie or body.
  await rig.subscribe(u.cookie);
  const k = await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'logged', scopes: [] } });
  await rig.call('GET', '/v1/auth/me', { key: k.json.secret });
  await rig.call('POST', '/v1/auth/login', { body: { email: u.email, password: u.password } });
  const reqLines = rig.logs.filter((l) => l.event === 'request');
  t.ok(reqLines.length > 8);
  for (const l of reqLines) t.same(Object.keys(l).sort(), ['event', 'machine_id', 'method', 'ms', 'operation', 'org', 'request_id', 'status']);
  t.ok(reqLines.some((l) => l.operation === 'api_keys.create' && l.org === u.orgId && l.status === 201));
  t.ok(reqLines.some((l) => l.operation === 'unmatched' && l.status === 404));
  const all = JSON.stringify(rig.logs);
  const cookieToken = u.cookie.split('=')[1]!;
  for (const secret of [u.email, u.password, cookieToken, k.json.secret, 'not-an-email', 'short']) {
    t.notOk(all.includes(secret), 'log holds no secret, e-mail, cookie or body value');
  }
});

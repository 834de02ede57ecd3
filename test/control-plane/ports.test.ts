/**
 * Published ports through /v1 and the preview hostnames, on the real listener (API + gateway + previews)
 * with the real agent app behind the fake substrate: its TCP stream route reaches a real web app (the
 * same script the container end to end runs in a guest) on this host's loopback. Contract, credentials,
 * proxying (bodies, SSE, WebSocket), unpublish cutting live connections, unavailable pages, isolation.
 * The container end to end (test/e2e/ports-container.test.ts) repeats the core inside a real machine.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { WsClient } from '../helpers/gateway-ws.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { writePreviewApp } from '../helpers/preview-app.js';
import { previewHost, previewRequest, previewSocket, previewStream } from '../helpers/preview-client.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';
import { freePort } from '../helpers/free-port.js';


t.test('published ports on preview hostnames', { timeout: 120_000 }, async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  // Gateway and preview log lines land in the rig's log, which the test scans for credentials.
  const served = await serveWithGateway(rig, { deps: { log: (l) => rig.logs.push(l) } });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ports-app-'));
  const appPort = await freePort();
  const app = spawn(process.execPath, [writePreviewApp(dir), String(appPort)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((r) => app.stdout!.once('data', () => r()));
  t.teardown(async () => {
    app.kill();
    await served.close();
    fake.close();
    await rig.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const port = served.port;

  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'machines:control', 'ports:write']);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const base = `/v1/machines/${m.id}/ports`;

  // --- contract ---------------------------------------------------------------------------------
  const created = await rig.call('POST', base, { key: a.key, body: { port: appPort, name: 'web' } });
  t.equal(created.status, 201);
  const pv = created.json;
  t.match(pv.id, /^prv_[0-9a-z]{24}$/);
  t.same(Object.keys(pv).sort(), ['access', 'access_url', 'created_at', 'id', 'last_request_at', 'machine_id', 'name', 'port', 'secret', 'url']);
  t.match(pv, { machine_id: m.id, port: appPort, name: 'web', access: 'private', last_request_at: null });
  t.equal(pv.url, `http://prv-${pv.id.slice(4)}.localhost/`, 'hostname label is the id with - for _ under localhost');
  t.match(pv.secret, /^prs_[0-9A-Za-z]{43}$/);
  t.match(pv.access_url, new RegExp(`^http://prv-${pv.id.slice(4)}\\.localhost/__computer/access\\?token=[0-9A-Za-z]{43}$`));
  t.equal(created.headers.get('cache-control'), 'no-store');
  const host = previewHost(pv.url, port);

  const again = await rig.call('POST', base, { key: a.key, body: { port: appPort, access: 'public' } });
  t.equal(again.status, 200, 'publishing a published port answers the existing preview');
  t.match(again.json, { id: pv.id, access: 'private', secret: null, access_url: null });
  const got = await rig.call('GET', `${base}/${pv.id}`, { key: a.key });
  t.match(got.json, { id: pv.id, secret: null, access_url: null, url: pv.url });
  t.same((await rig.call('GET', base, { key: a.key })).json.data.map((x: any) => x.id), [pv.id]);
  t.same((await rig.call('GET', '/v1/ports', { key: a.key })).json.data.map((x: any) => x.id), [pv.id]);

  for (const [body, field] of [
    [{ port: 0 }, 'port'], [{ port: 65536 }, 'port'], [{ port: '80' }, 'port'], [{ port: 1.5 }, 'port'], [{}, 'port'],
    [{ port: 80, access: 'open' }, 'access'], [{ port: 80, extra: 1 }, ''], [{ port: 80, name: 'x'.repeat(101) }, 'name'],
  ] as const) {
    const r = await rig.call('POST', base, { key: a.key, body });
    assertEnvelope(t, r, 'invalid_request', 400);
    if (field) t.ok(r.json.error.details.some((d: any) => d.field === field), `detail names ${field}`);
  }
  assertEnvelope(t, await rig.call('POST', base, { key: a.key, rawBody: '{"port":' }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('GET', `${base}/prv_nope`, { key: a.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('GET', `/v1/machines/mch_${'0'.repeat(24)}/ports`, { key: a.key }), 'not_found', 404);

  // --- permissions and isolation ----------------------------------------------------------------
  const reader = await rig.key(a.cookie, ['machines:read', 'ports:read']);
  assertEnvelope(t, await rig.call('POST', base, { key: reader.key, body: { port: 81 } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('DELETE', `${base}/${pv.id}`, { key: reader.key }), 'permission_denied', 403);
  t.equal((await rig.call('GET', base, { key: reader.key })).status, 200, 'reads need membership only');
  const b = await rig.tenant('developer', ['machines:read', 'machines:write', 'ports:write']);
  assertEnvelope(t, await rig.call('GET', `${base}/${pv.id}`, { key: b.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('GET', base, { key: b.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('POST', base, { key: b.key, body: { port: 82 } }), 'not_found', 404);
  assertEnvelope(t, await rig.call('DELETE', `${base}/${pv.id}`, { key: b.key }), 'not_found', 404);
  t.same((await rig.call('GET', '/v1/ports', { key: b.key })).json.data, [], "another organization's list is empty");
  const mb = (await rig.call('POST', '/v1/machines', { key: b.key, body: {} })).json;
  const pvb = (await rig.call('POST', `/v1/machines/${mb.id}/ports`, { key: b.key, body: { port: appPort } })).json;
  t.not(pvb.id, pv.id, 'the same port on another machine is another hostname');
  const hostB = previewHost(pvb.url, port);
  t.equal((await previewRequest(port, host, { headers: { authorization: `Bearer ${pvb.secret}` } })).status, 401, "B's secret does not open A's preview");
  t.equal((await previewRequest(port, hostB, { headers: { authorization: `Bearer ${pv.secret}` } })).status, 401, "A's secret does not open B's preview");

  // --- private: refusals ------------------------------------------------------------------------
  const anon = await previewRequest(port, host);
  t.equal(anon.status, 401);
  t.match(anon.headers['content-type'], /^text\/html/);
  t.match(anon.text, /This preview is private/);
  t.notMatch(anon.text, new RegExp(`${m.id}|${a.orgId}|${appPort}`), 'the page names no machine, organization or port');
  const anonJson = await previewRequest(port, host, { headers: { accept: 'application/json' } });
  t.equal(anonJson.status, 401);
  t.equal(anonJson.json.error.code, 'unauthenticated');
  t.equal((await previewRequest(port, host, { headers: { authorization: 'Bearer prs_' + 'x'.repeat(43) } })).status, 401, 'wrong bearer');
  t.equal((await previewRequest(port, host, { headers: { cookie: 'computer_preview=' + 'x'.repeat(43) } })).status, 401, 'forged cookie');
  t.equal((await previewRequest(port, host, { headers: { authorization: `Bearer ${a.key}` } })).status, 401, 'an API key is not a preview credential');
  t.equal((await previewRequest(port, host, { headers: { cookie: a.cookie } })).status, 401, 'the API session cookie is not one either');

  // --- private: bearer ---------------------------------------------------------------------------
  const bearer = { authorization: `Bearer ${pv.secret}` };
  const hello = await previewRequest(port, host, { headers: bearer });
  t.equal(hello.status, 200);
  t.equal(hello.text, 'hello from the app');
  const seen = await previewRequest(port, host, { path: '/headers', headers: { ...bearer, cookie: `${a.cookie}; theme=dark; computer_preview=zzz`, 'x-custom': 'kept' } });
  t.equal(seen.json.authorization, undefined, 'the preview bearer never reaches the guest');
  t.equal(seen.json.cookie, 'theme=dark', "the guest's own cookies pass; ours (API session, preview) never do");
  t.equal(seen.json['x-custom'], 'kept');
  t.equal(seen.json.host, host, 'the preview host is what the app sees');
  t.equal(seen.json['x-forwarded-proto'], 'http');
  t.equal(seen.json['x-forwarded-for'], '127.0.0.1');
  const basic = await previewRequest(port, host, { path: '/headers', headers: { cookie: '', authorization: 'Basic dTpw' } });
  t.equal(basic.status, 401, "another Authorization scheme is not a credential of ours (and without one it's refused)");

  const up = Buffer.alloc(3 * 1024 * 1024 + 7, 'q');
  const echoed = await previewRequest(port, host, { method: 'POST', path: '/echo', headers: { ...bearer, 'content-type': 'text/plain' }, body: up });
  t.equal(echoed.status, 200);
  t.equal(echoed.text.length, up.length, 'a 3 MB body went up and came back whole');
  const chunked = await new Promise<string>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'PUT', path: '/echo', headers: { host, ...bearer } }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (s += c));
      res.on('end', () => resolve(s));
    });
    req.on('error', reject);
    req.write('chunk-one,');
    setImmediate(() => req.end('chunk-two'));
  });
  t.equal(chunked, 'chunk-one,chunk-two', 'a chunked request body streams through');
  t.equal((await previewRequest(port, host, { path: '/nope', headers: bearer })).status, 404, "the app's own statuses pass");
  t.equal((await previewRequest(port, host, { path: '/v1/auth/me', headers: bearer })).text, 'no such page', 'a preview host never reaches the API');

  const cookieRes = await previewRequest(port, host, { path: '/cookie', headers: bearer });
  t.same(cookieRes.headers['set-cookie'], ['app=1; Path=/; HttpOnly'], "a guest cookie loses its Domain, and the guest cannot set the preview's cookie");

  // --- private: the one-shot access link → a host-only cookie -------------------------------------
  const link = new URL(pv.access_url);
  const traded = await previewRequest(port, host, { path: link.pathname + link.search });
  t.equal(traded.status, 303);
  t.equal(traded.headers.location, '/');
  const setCookie = traded.headers['set-cookie']![0]!;
  t.match(setCookie, /^computer_preview=[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Lax$/, 'HttpOnly, SameSite=Lax, no Domain, no Secure on http');
  const cookie = setCookie.split(';')[0]!;
  t.equal((await previewRequest(port, host, { path: link.pathname + link.search })).status, 401, 'the access link works once');
  t.equal((await previewRequest(port, host, { path: link.pathname + link.search, headers: { cookie } })).status, 303, 'a browser with the cookie is just sent on');
  const viaCookie = await previewRequest(port, host, { path: '/headers', headers: { cookie } });
  t.equal(viaCookie.status, 200);
  t.equal(viaCookie.json.cookie, undefined, 'the preview cookie never reaches the guest');
  t.equal((await previewRequest(port, host, { headers: { cookie, origin: `http://${hostB}` } })).status, 401, 'a cookie sent from another origin (a sibling preview) is refused');
  t.equal((await previewRequest(port, host, { headers: { cookie, origin: `http://${host.replace(/:\d+$/, '')}` } })).status, 200, 'from its own origin it is fine');
  t.equal((await previewRequest(port, hostB, { headers: { cookie } })).status, 401, "A's cookie does not open B's preview");

  // --- server-sent events arrive unbuffered --------------------------------------------------------
  const sse = await previewStream(port, host, '/sse', bearer);
  t.equal(sse.status, 200);
  t.equal(sse.headers['content-type'], 'text/event-stream');
  await sse.waitFor((s) => s.includes('data: one\n\n'), 'the first event');
  t.notMatch(sse.body(), /two/, 'the first event arrived while the app still held the second');
  t.equal((await previewRequest(port, host, { path: '/sse-next', headers: bearer })).text, '1');
  await sse.waitFor((s) => s.includes('data: two\n\n'), 'the second event');
  await sse.ended;

  // --- WebSocket: bearer, cookie, then unpublish cuts it -----------------------------------------
  const refused = await previewSocket(port, host, '/ws');
  t.notOk(refused instanceof WsClient);
  t.equal((refused as { status: number }).status, 401, 'a WebSocket without a credential is refused');
  const crossSite = await previewSocket(port, host, '/ws', { cookie, origin: `http://${hostB}` });
  t.equal((crossSite as { status: number }).status, 401, 'a cookie WebSocket from a sibling origin is refused (CSWSH)');
  const ws1 = (await previewSocket(port, host, '/ws', bearer)) as WsClient;
  t.ok(ws1 instanceof WsClient, 'upgraded with the bearer');
  ws1.sendJson({ n: 1 });
  await ws1.waitFor(() => ws1.texts.length === 1, 'echo');
  t.same(ws1.texts, [{ n: 1 }]);
  const big = Buffer.alloc(200_000, 9);
  ws1.ws.send(big);
  await ws1.waitFor(() => ws1.binaries.length === 1, 'binary echo');
  t.ok(ws1.binaries[0]!.equals(big), 'a 200 KB binary message echoed whole');
  const ws2 = (await previewSocket(port, host, '/ws', { cookie })) as WsClient;
  t.ok(ws2 instanceof WsClient, 'upgraded with the cookie');
  ws2.sendJson({ n: 2 });
  await ws2.waitFor(() => ws2.texts.length === 1, 'echo 2');

  // Egress: what reached preview clients was counted for the machine.
  const counted = (served.egress as unknown as { peek(id: string): number }).peek(m.id);
  t.ok(counted >= up.length + big.length, `egress counted (${counted} bytes)`);

  // last_request_at is kept.
  const after = (await rig.call('GET', `${base}/${pv.id}`, { key: a.key })).json;
  t.match(after.last_request_at, /^\d{4}-\d\d-\d\dT/);

  t.equal(served.previews!.openConnections(), 2);
  const gone = await rig.call('DELETE', `${base}/${pv.id}`, { key: a.key });
  t.equal(gone.status, 204);
  const c1 = await ws1.closedP;
  const c2 = await ws2.closedP;
  t.equal(c1.code, 1006, 'unpublish cut the live WebSocket (no close handshake)');
  t.equal(c2.code, 1006);
  t.equal(served.previews!.openConnections(), 0);
  t.equal((await previewRequest(port, host, { headers: bearer })).status, 404, 'the hostname stops answering');
  assertEnvelope(t, await rig.call('GET', `${base}/${pv.id}`, { key: a.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('DELETE', `${base}/${pv.id}`, { key: a.key }), 'not_found', 404);
  t.equal((await rig.store.db.q().selectFrom('previews').select('id').where('id', '=', pv.id).execute()).length, 1, 'the row stays as a tombstone: the id is never issued again');

  // Public: anyone, and Authorization passes through untouched.
  const pubNew = await rig.call('POST', base, { key: a.key, body: { port: appPort, access: 'public' } });
  t.equal(pubNew.status, 201);
  t.not(pubNew.json.id, pv.id, 'a republished port gets a new hostname');
  t.notOk('secret' in pubNew.json, 'no secret for public access');
  t.equal(pubNew.json.access_url, null);
  const pubHost = previewHost(pubNew.json.url, port);
  t.equal((await previewRequest(port, pubHost)).text, 'hello from the app');
  t.equal((await previewRequest(port, pubHost, { path: '/headers', headers: { authorization: 'Bearer app-token' } })).json.authorization, 'Bearer app-token');
  const wsPub = (await previewSocket(port, pubHost, '/ws')) as WsClient;
  wsPub.sendJson({ pub: true });
  await wsPub.waitFor(() => wsPub.texts.length === 1, 'public echo');
  await wsPub.close();

  // --- unavailable: nothing listening, machine stopped, unknown host ------------------------------
  const idle = (await rig.call('POST', base, { key: a.key, body: { port: await freePort(), access: 'public' } })).json;
  const idleHost = previewHost(idle.url, port);
  const nothing = await previewRequest(port, idleHost);
  t.equal(nothing.status, 503, 'nothing listening is compute_unavailable, with its envelope status');
  t.equal(nothing.headers['retry-after'], '2');
  t.match(nothing.headers['content-type'], /^text\/html/);
  t.match(nothing.text, /Nothing is answering/);
  const nothingJson = await previewRequest(port, idleHost, { headers: { accept: 'application/json' } });
  t.equal(nothingJson.status, 503);
  t.equal(nothingJson.json.error.code, 'compute_unavailable');
  t.equal((await previewSocket(port, idleHost, '/ws') as { status: number }).status, 503, 'a WebSocket to nothing gets the 503 too');
  t.equal((await previewRequest(port, `prv-${'0'.repeat(24)}.localhost:${port}`)).status, 404, 'an unknown preview is a 404 page');
  t.equal((await previewRequest(port, `prv-bad.localhost:${port}`)).status, 404, 'a malformed label too, never the API');
  t.equal((await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key })).status, 200);
  const stopped = await previewRequest(port, pubHost);
  t.equal(stopped.status, 503);
  t.match(stopped.text, /not running/);
  t.equal(stopped.headers['retry-after'], '5');

  // --- the secrets never reached a log -----------------------------------------------------------
  const logs = JSON.stringify(rig.logs);
  t.notOk(logs.includes(pv.secret) || logs.includes(pvb.secret), 'no preview secret in the log');
  t.notOk(logs.includes(link.searchParams.get('token')!), 'no access token in the log');
  t.notOk(logs.includes(cookie.split('=')[1]!), 'no preview cookie in the log');
  t.notOk(rig.bodies.slice(rig.bodies.indexOf(created.text) + 1).some((b) => b.includes(pv.secret)), 'the secret was in the creating answer only');
});

t.test('PREVIEW_DOMAIN=off: publishing is unsupported, and previews are not served', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate, env: { PREVIEW_DOMAIN: 'off' } });
  const served = await serveWithGateway(rig);
  t.teardown(async () => {
    await served.close();
    fake.close();
    await rig.close();
  });
  t.equal(served.previews, null);
  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'ports:write']);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/ports`, { key: a.key, body: { port: 80 } }), 'unsupported_operation', 501);
  t.same((await rig.call('GET', '/v1/ports', { key: a.key })).json.data, []);
});

t.test('a hostile app: malformed, oversized or missing answers are the unavailable page, and the control plane stays up', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  const served = await serveWithGateway(rig, { previews: { headerTimeoutMs: 500 } });
  const answers: Record<string, string | null> = {
    '/bad-char': 'HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nok',
    '/bad-status': 'HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok',
    '/huge-head': `HTTP/1.1 200 OK\r\nX-Big: ${'h'.repeat(100_000)}\r\n\r\n`,
    '/garbage': 'hello there\r\n\r\n',
    '/silent': null,
    '/fine': 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine',
  };
  const app = net.createServer((sock) => {
    sock.on('error', () => {});
    let head = '';
    sock.on('data', (d) => {
      head += d.toString('latin1');
      const path = /^[A-Z]+ (\S+)/.exec(head)?.[1];
      if (!path || !head.includes('\r\n\r\n')) return;
      const a = answers[path];
      if (a) sock.end(a);
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', () => r()));
  t.teardown(async () => {
    app.close();
    await served.close();
    fake.close();
    await rig.close();
  });
  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'ports:write']);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const pv = (await rig.call('POST', `/v1/machines/${m.id}/ports`, { key: a.key, body: { port: (app.address() as net.AddressInfo).port, access: 'public' } })).json;
  const host = previewHost(pv.url, served.port);
  for (const p of ['/bad-char', '/bad-status', '/huge-head', '/garbage', '/silent']) {
    const r = await previewRequest(served.port, host, { path: p });
    t.equal(r.status, 503, `${p}: 503`);
    t.match(r.text, /closed the connection or did not answer in time/);
  }
  t.equal((await previewRequest(served.port, host, { path: '/fine' })).text, 'fine', 'still serving');
  t.equal(served.previews!.openConnections(), 0, 'nothing left open');
});

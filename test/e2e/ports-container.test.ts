/**
 * Published ports end to end on the container substrate: a web app (HTTP, server-sent events and a
 * WebSocket echo; test/helpers/preview-app.ts) started inside a real machine is reached through a
 * private preview (access link → cookie; bearer) and a public one, over the real listener and the agent
 * channel. The unavailable page before the app listens and after the machine stops; unpublish cuts a
 * live WebSocket. One machine for the whole file. Needs root, podman and runc.
 */
import t from 'tap';
import { WsClient } from '../helpers/gateway-ws.js';
import { serveOnContainers } from '../helpers/container-served.js';
import { PREVIEW_APP_JS } from '../helpers/preview-app.js';
import { previewHost, previewRequest, previewSocket, previewStream } from '../helpers/preview-client.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

async function until<T>(what: string, fn: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 240; i++) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`gave up waiting for ${what}`);
}

t.test('published ports end to end on the container substrate', { timeout: 900_000 }, async (t) => {
  const { rig, served, created } = await serveOnContainers(t, 'pte-');
  const port = served.port;

  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'machines:control', 'ports:write']);
  const mr = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'ports-e2e' } });
  t.equal(mr.status, 201, 'machine created');
  const m = mr.json;
  created.push(m.id);
  const base = `/v1/machines/${m.id}`;
  await until('the agent', async () => ((await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['true'] } })).status === 200 ? true : null));
  const w = await rig.call('PUT', `${base}/files/content?path=${encodeURIComponent('/home/agent/app.cjs')}`, { key: a.key, body: { content: PREVIEW_APP_JS } });
  t.equal(w.status, 200, 'the app is in the machine');

  // Published before anything listens: the preview says so, and never hangs.
  const pr = await rig.call('POST', `${base}/ports`, { key: a.key, body: { port: 3000, name: 'app' } });
  t.equal(pr.status, 201);
  const pv = pr.json;
  const host = previewHost(pv.url, port);
  const bearer = { authorization: `Bearer ${pv.secret}` };
  const early = await previewRequest(port, host, { headers: bearer });
  t.equal(early.status, 503, 'nothing listening yet: 503 compute_unavailable');
  t.match(early.headers['content-type'], /^text\/html/);
  t.match(early.text, /Nothing is answering/);
  const earlyJson = await previewRequest(port, host, { headers: { ...bearer, accept: 'application/json' } });
  t.equal(earlyJson.json.error.code, 'compute_unavailable');

  const started = await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['sh', '-c', 'node /home/agent/app.cjs 3000 >/tmp/app3000.log 2>&1 & node /home/agent/app.cjs 3001 >/tmp/app3001.log 2>&1 &'] } });
  t.equal(started.status, 200, 'two app instances started in the guest');
  await until('the app through the preview', async () => ((await previewRequest(port, host, { headers: bearer })).status === 200 ? true : null));

  // --- private: bearer, then the access link → cookie ------------------------------------------
  const hello = await previewRequest(port, host, { headers: bearer });
  t.equal(hello.text, 'hello from the app', 'reached the guest app with the bearer');
  const seen = (await previewRequest(port, host, { path: '/headers', headers: { ...bearer, cookie: `${a.cookie}; app=1` } })).json;
  t.equal(seen.authorization, undefined, 'the bearer was stripped');
  t.equal(seen.cookie, 'app=1', "the API's cookie was stripped");
  t.equal((await previewRequest(port, host)).status, 401, 'no credential: 401');
  t.equal((await previewRequest(port, host, { headers: { authorization: 'Bearer prs_wrong' } })).status, 401, 'wrong credential: 401');
  const link = new URL(pv.access_url);
  const traded = await previewRequest(port, host, { path: link.pathname + link.search });
  t.equal(traded.status, 303);
  const cookie = traded.headers['set-cookie']![0]!.split(';')[0]!;
  t.equal((await previewRequest(port, host, { headers: { cookie } })).text, 'hello from the app', 'reached with the cookie');
  const up = Buffer.alloc(2 * 1024 * 1024, 'z');
  const echoed = await previewRequest(port, host, { method: 'POST', path: '/echo', headers: { cookie }, body: up });
  t.equal(echoed.text.length, up.length, 'a 2 MB body through the guest and back');

  // --- server-sent events, unbuffered ----------------------------------------------------------
  const sse = await previewStream(port, host, '/sse', { cookie });
  await sse.waitFor((s) => s.includes('data: one\n\n'), 'the first event');
  t.notMatch(sse.body(), /two/, 'the first event arrived while the app held the second');
  await previewRequest(port, host, { path: '/sse-next', headers: { cookie } });
  await sse.waitFor((s) => s.includes('data: two\n\n'), 'the second event');
  await sse.ended;

  // --- WebSocket echo in the guest, then unpublish cuts it -------------------------------------
  const ws = (await previewSocket(port, host, '/ws', { cookie })) as WsClient;
  t.ok(ws instanceof WsClient, 'WebSocket upgraded through the preview');
  ws.sendJson({ hello: 'guest' });
  await ws.waitFor(() => ws.texts.length === 1, 'echo');
  t.same(ws.texts, [{ hello: 'guest' }]);
  const wsBearer = (await previewSocket(port, host, '/ws', bearer)) as WsClient;
  wsBearer.sendJson({ n: 2 });
  await wsBearer.waitFor(() => wsBearer.texts.length === 1, 'echo (bearer)');

  // --- public: anyone --------------------------------------------------------------------------
  const pub = (await rig.call('POST', `${base}/ports`, { key: a.key, body: { port: 3001, access: 'public' } })).json;
  const pubHost = previewHost(pub.url, port);
  t.equal((await previewRequest(port, pubHost)).text, 'hello from the app', 'the public preview answers without a credential');
  const wsPub = (await previewSocket(port, pubHost, '/ws')) as WsClient;
  wsPub.sendJson({ pub: 1 });
  await wsPub.waitFor(() => wsPub.texts.length === 1, 'public echo');

  // Another organization sees nothing of it.
  const b = await rig.tenant('developer', ['machines:read']);
  t.equal((await rig.call('GET', `${base}/ports/${pv.id}`, { key: b.key })).status, 404);
  t.same((await rig.call('GET', '/v1/ports', { key: b.key })).json.data, []);

  t.equal((await rig.call('DELETE', `${base}/ports/${pv.id}`, { key: a.key })).status, 204);
  t.equal((await ws.closedP).code, 1006, 'unpublish cut the live WebSocket');
  t.equal((await wsBearer.closedP).code, 1006);
  t.equal((await previewRequest(port, host, { headers: bearer })).status, 404, 'the hostname stops answering');
  t.notOk(wsPub.closed, 'the public preview of another port is untouched');

  // --- machine stopped: 503 page; its open socket ends too -------------------------------------
  t.equal((await rig.call('POST', `${base}/stop`, { key: a.key })).status, 200);
  await wsPub.closedP;
  const stopped = await previewRequest(port, pubHost);
  t.equal(stopped.status, 503, 'machine stopped: 503');
  t.match(stopped.text, /not running/);

  const logs = JSON.stringify(rig.logs);
  t.notOk(logs.includes(pv.secret), 'the secret never reached the log');
  t.notOk(logs.includes(link.searchParams.get('token')!), 'nor the access token');
});

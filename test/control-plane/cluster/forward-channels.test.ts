/**
 * Gateway channels and preview connections forwarded to the machine's owner (issue 24 item 5, issue 25 item 3):
 * a caller arrives at process A, which admits it and forwards to B's internal listener; B runs the channel (a real
 * pty through the real agent app) or reaches the guest's app (a real web app on this host's loopback). Real
 * sockets throughout (test/helpers/forward-served.ts): every byte A sent B is read from a wiretap.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPtyManager } from '../../../agent/src/pty/manager.js';
import { terminalsRoutes } from '../../../agent/src/routes/terminals.js';
import { startForwardedPair } from '../../helpers/forward-served.js';
import { connect, open, WsClient } from '../../helpers/gateway-ws.js';
import { fakeSubstrateWithAgents } from '../../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../../helpers/machines-rig.js';
import { writePreviewApp } from '../../helpers/preview-app.js';
import { previewHost, previewRequest, previewSocket } from '../../helpers/preview-client.js';
import { freePort } from '../../helpers/free-port.js';


const UNREACHABLE = { code: 'compute_unavailable', message: "The machine's host is not reachable right now; retry shortly." };
const MOVED = { code: 'compute_unavailable', message: "The machine's host changed while the request was on its way; retry." };

t.test('channels and previews forwarded to the owner', { timeout: 180_000 }, async (t) => {
  const ptys = createPtyManager();
  const fake = fakeSubstrateWithAgents({ mountsFirst: () => [terminalsRoutes(ptys)] });
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  const pair = await startForwardedPair(t, rig, { gateway: { credentialCheckMs: 100 } });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fwd-channels-'));
  const appPort = await freePort();
  const app = spawn(process.execPath, [writePreviewApp(dir), String(appPort)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((r) => app.stdout!.once('data', () => r()));
  t.teardown(async () => {
    app.kill();
    ptys.closeAll();
    fake.close();
    await rig.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const tenant = await rig.tenant('developer', ['machines:read', 'machines:write', 'machines:control', 'ports:write']);
  const auth = { authorization: `Bearer ${tenant.key}` };
  const m = (await rig.call('POST', '/v1/machines', { key: tenant.key, body: {} })).json;
  const base = `/v1/machines/${m.id}`;
  const aWs = `ws://127.0.0.1:${pair.a.port}${base}`;

  await t.test('a terminal opened on A runs on B, bytes both ways, no credential on the wire', async (t) => {
    const term = await rig.call('POST', `${base}/terminals`, { key: tenant.key, body: { command: ['sh', '-c', 'while read l; do echo "got-$l"; done'], cols: 80, rows: 24 } });
    t.equal(term.status, 200);
    const c = await open(`${aWs}/terminals/${term.json.id}/attach`, { ...auth, cookie: `${tenant.cookie}; theme=dark` });
    const output = () => Buffer.concat(c.binaries).toString('latin1');
    c.ws.send(Buffer.from('ping\n'));
    await c.waitFor(() => output().includes('got-ping'), 'got-ping');
    t.pass('typed on A, echoed by the pty B serves');
    const forwarded = await pair.aLog.next((l) => l.event === 'ws_forwarded' && l.channel === 'terminal');
    t.match(forwarded, { target: 'cp-owner' }, 'A forwarded the channel to B');
    t.equal(pair.b.gateway.counts().terminal, 1, 'B runs the channel');
    t.equal(pair.a.gateway.counts().terminal, 0, 'A runs none: it only relays');

    const wire = pair.wire();
    t.match(wire, `GET ${base}/terminals/${term.json.id}/attach HTTP/1.1`, 'the upgrade crossed');
    t.match(wire, /x-computer-forward-assertion: /i);
    t.notMatch(wire, tenant.key, 'the API key never crossed');
    t.notMatch(wire, /authorization:/i, 'no Authorization header crossed');
    t.notMatch(wire, tenant.cookie.split('=')[1]!, 'the session cookie never crossed');
    t.match(wire, /cookie: theme=dark/i, "a cookie that is not ours crossed");
    await c.close();
  });

  await t.test('a revoked key on A ends the forwarded channel on both sides', async (t) => {
    const second = await rig.key(tenant.cookie, ['machines:read']);
    const from = pair.aLog.lines.length;
    const c = await open(`${aWs}/events/live`, { authorization: `Bearer ${second.key}` });
    const forwarded = await pair.aLog.next((l) => l.event === 'ws_forwarded' && l.channel === 'events' && pair.aLog.lines.indexOf(l) >= from);
    const revoked = await rig.call('DELETE', `/v1/api-keys/${second.keyId}`, { cookie: tenant.cookie });
    t.ok(revoked.status === 200 || revoked.status === 204, `revoked (${revoked.status})`);
    // A hang guard, not a timing check: without the re-check the channel would stay open.
    const closed = await Promise.race([c.closedP, new Promise<never>((_, no) => setTimeout(() => no(new Error('the channel stayed open')), 30_000).unref())]);
    t.equal(closed.code, 1006, 'A cut the caller\'s connection (the frames are B\'s, so no close frame of A\'s)');
    const ended = await pair.bLog.next((l) => l.event === 'ws' && l.request_id === forwarded.request_id);
    t.equal(ended.channel, 'events', "B's channel ended with it");
    await pair.aLog.next((l) => l.event === 'forward_channel_closed' && l.request_id === forwarded.request_id);
    t.equal(pair.a.gateway.counts().events + pair.b.gateway.counts().events, 0);
  });

  const pv = (await rig.call('POST', `${base}/ports`, { key: tenant.key, body: { port: appPort } })).json;
  const host = previewHost(pv.url, pair.a.port);
  const bearer = { authorization: `Bearer ${pv.secret}` };

  await t.test("a preview request through A reaches B's guest app", async (t) => {
    const hello = await previewRequest(pair.a.port, host, { headers: bearer });
    t.equal(hello.status, 200);
    t.equal(hello.text, 'hello from the app');
    const seen = await previewRequest(pair.a.port, host, { path: '/headers', headers: { ...bearer, 'x-forwarded-for': '198.51.100.1', 'x-custom': 'kept' } });
    t.equal(seen.json.authorization, undefined, 'the preview secret never reaches the guest');
    t.equal(seen.json['x-forwarded-for'], '127.0.0.1', "the visitor's address as A saw it, never a header it sent");
    t.equal(seen.json.host, host);
    t.equal(seen.json['x-forwarded-host'], host);
    t.equal(seen.json['x-custom'], 'kept');
    const basic = await previewRequest(pair.a.port, host, { path: '/headers', headers: { cookie: (await accessCookie()), authorization: 'Basic dTpw' } });
    t.equal(basic.json.authorization, 'Basic dTpw', "the guest app's own Authorization crosses (the visitor came in with the preview cookie)");
    const wire = pair.wire();
    t.match(wire, 'GET /headers HTTP/1.1', 'the requests went through B');
    t.notMatch(wire, pv.secret, 'the preview secret never crossed');
    t.notMatch(wire, /computer_preview=/, 'nor the preview cookie');
  });

  /** The access link is traded on A, where the visitor arrived: the cookie it sets. */
  async function accessCookie(): Promise<string> {
    const u = new URL(pv.access_url);
    const r = await previewRequest(pair.a.port, host, { path: `${u.pathname}${u.search}` });
    if (r.status !== 303) throw new Error(`access link ${r.status}`);
    return String(r.headers['set-cookie']).split(';')[0]!;
  }

  await t.test("a preview WebSocket through A reaches B's guest app", async (t) => {
    const c = await previewSocket(pair.a.port, host, '/ws', bearer);
    if (!(c instanceof WsClient)) throw new Error(`refused ${JSON.stringify(c)}`);
    c.sendJson({ echo: 'me' });
    t.same(await c.waitFor(() => c.texts[0], 'the echo'), { echo: 'me' }, 'a message went to the app and back');
    c.ws.send(Buffer.from([0, 1, 2, 255]));
    t.same([...(await c.waitFor(() => c.binaries[0], 'the binary echo'))], [0, 1, 2, 255]);
    t.ok(pair.wire().includes('GET /ws HTTP/1.1'), 'the upgrade went through B');
    await c.close();
  });

  await t.test('the owner refusing is relayed', async (t) => {
    pair.bSaysMoved = true;
    t.teardown(() => void (pair.bSaysMoved = false));
    const r = await connect(`${aWs}/events/live`, auth);
    t.ok(!(r instanceof WsClient), 'refused');
    if (r instanceof WsClient) return;
    t.equal(r.status, 503);
    t.match(r.body.error, MOVED);
    const p = await previewRequest(pair.a.port, host, { headers: { ...bearer, accept: 'application/json' } });
    t.equal(p.status, 503);
    t.match(p.json.error, MOVED);
  });

  await t.test('an unreachable owner is a 503 envelope', async (t) => {
    const was = pair.ownerAddress;
    pair.ownerAddress = `http://127.0.0.1:${await freePort()}`;
    t.teardown(() => void (pair.ownerAddress = was));
    const r = await connect(`${aWs}/events/live`, auth);
    t.ok(!(r instanceof WsClient), 'refused');
    if (r instanceof WsClient) return;
    t.equal(r.status, 503);
    t.match(r.body.error, UNREACHABLE);
    const p = await previewRequest(pair.a.port, host, { headers: bearer });
    t.equal(p.status, 503);
    t.match(p.json.error, UNREACHABLE);
    const s = await previewSocket(pair.a.port, host, '/ws', bearer);
    t.ok(!(s instanceof WsClient));
    if (!(s instanceof WsClient)) t.equal(s.status, 503);
  });
});

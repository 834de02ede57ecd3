/**
 * Input channel with real ws clients through the real control plane (real sessions and input lease) to
 * the real agent on a real Xvfb: input applied and visible on the screen channel, fencing on a forced
 * takeover mid-stream (exactly one lease_lost, nothing applied afterwards), a wrong fence, rate limit, and a
 * secret typed by reference into a real xterm.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { xrun } from '../helpers/desktop-agent.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { connect, open, WsClient } from '../helpers/gateway-ws.js';

t.test('input channel', { timeout: 180_000 }, async (t) => {
  const g = await startGatewayRig(t, { xvfb: { width: 1280, height: 800 } });
  await g.desktopUp();
  const base = `/v1/machines/${g.machineId}`;
  const inputUrl = (sessionId: string) => `${g.wsBase}${base}/input?session_id=${sessionId}`;
  const pointer = async () => {
    const r = await xrun(g.xvfb.display, 'xdotool', ['getmouselocation']);
    const m = /x:(\d+) y:(\d+)/.exec(r.stdout)!;
    return { x: Number(m[1]), y: Number(m[2]) };
  };
  const session = async (key: string) => {
    const r = await g.rig.call('POST', '/v1/sessions', { key, body: { machine_id: g.machineId, type: 'agent' } });
    if (r.status !== 201) throw new Error(`session ${r.status} ${r.text}`);
    return r.json.id as string;
  };
  const acquire = async (key: string, sessionId: string, force = false) => {
    const r = await g.rig.call('POST', `${base}/input-lease`, { key, body: { session_id: sessionId, force } });
    if (r.status !== 200) throw new Error(`acquire ${r.status} ${r.text}`);
    return r.json.fence as number;
  };
  const children: ChildProcess[] = [];
  t.teardown(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });

  const s1 = await session(g.tenant.key);
  const f1 = await acquire(g.tenant.key, s1);

  await t.test('input is applied in order and shows up on the screen channel', async (t) => {
    const xterm = spawn('xterm', ['-geometry', '60x10+0+0'], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DISPLAY: g.xvfb.display }, stdio: 'ignore' });
    children.push(xterm);
    for (let i = 0; i < 100; i++) {
      const r = await xrun(g.xvfb.display, 'xdotool', ['search', '--class', 'xterm']);
      if (r.stdout.trim()) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    const viewer = await open(`${g.wsBase}${base}/screen?format=jpeg&quality=60&fps=20`, g.auth);
    await viewer.waitFor(() => viewer.binaries.length >= 1, 'first frame');
    const inp = await open(inputUrl(s1), g.auth);
    inp.sendJson({ type: 'mouse.move', fence: f1, x: 100, y: 40, id: 'm1' });
    const ack = await inp.waitFor(() => inp.text('ack').find((a) => a.id === 'm1'), 'ack m1');
    t.match(ack, { type: 'ack', op: 'mouse.move', result: { pointer: { x: 100, y: 40 } } });
    t.same(await pointer(), { x: 100, y: 40 }, 'the real pointer moved');
    // Let the screen settle (frames are sent only on change), then type into the focused xterm.
    let settled = viewer.binaries.length;
    for (;;) {
      await new Promise((r) => setTimeout(r, 300));
      if (viewer.binaries.length === settled) break;
      settled = viewer.binaries.length;
    }
    const before = viewer.binaries[viewer.binaries.length - 1]!;
    inp.sendJson({ type: 'keyboard.type', fence: f1, text: 'hello gateway', id: 't1' });
    await inp.waitFor(() => inp.text('ack').find((a) => a.id === 't1'), 'ack t1');
    await viewer.waitFor(() => viewer.binaries.length > settled, 'a frame after typing');
    t.notOk(viewer.binaries[viewer.binaries.length - 1]!.equals(before), 'the typed text changed the screen');

    inp.sendJson({ type: 'mouse.move', fence: f1, x: 99999, y: 1, id: 'bad' });
    const err = await inp.waitFor(() => inp.text('error').find((e) => e.id === 'bad'), 'error bad');
    t.equal(err.code, 'invalid_request', 'invalid messages get an error message');
    t.equal(err.details[0].field, 'x');
    inp.sendJson({ type: 'mouse.move', fence: f1, x: 1279 + 5, y: 1, id: 'off' });
    const off = await inp.waitFor(() => inp.text('error').find((e) => e.id === 'off'), 'error off');
    t.equal(off.code, 'invalid_request', "the agent's refusal (outside the display) is relayed");
    t.equal(inp.text('lease_lost').length, 0);
    await Promise.all([inp.close(), viewer.close()]);
    xterm.kill('SIGKILL');
  });

  const SECRET_VALUE = 'gw-typed-by-reference-7d1c';
  await t.test('keyboard.type by secret reference: the stored value is typed, and no message carries it', async (t) => {
    // Stored with a key that may write secrets; typed through a socket whose key may only control the machine.
    const { key: writer } = await g.rig.key(g.tenant.cookie, ['secrets:write']);
    const put = await g.rig.call('PUT', `${base}/secrets`, { key: writer, body: { name: 'SITE_PASSWORD', value: SECRET_VALUE } });
    t.equal(put.status, 200, put.text);
    const out = path.join(os.tmpdir(), `gw-secret-${process.pid}.txt`);
    t.teardown(() => fs.rmSync(out, { force: true }));
    const xterm = spawn('xterm', ['-geometry', '60x10+0+0', '-e', 'sh', '-c', `cat > ${out}`], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DISPLAY: g.xvfb.display }, stdio: 'ignore' });
    children.push(xterm);
    for (let i = 0; i < 100 && !fs.existsSync(out); i++) await new Promise((r) => setTimeout(r, 50));
    const inp = await open(inputUrl(s1), g.auth);
    inp.sendJson({ type: 'mouse.move', fence: f1, x: 100, y: 40, id: 's0' });
    inp.sendJson({ type: 'keyboard.type', fence: f1, secret: 'SITE_PASSWORD', settle: { quiet_ms: 50, screenshot: { format: 'jpeg' } }, id: 's1' });
    inp.sendJson({ type: 'keyboard.key', fence: f1, key: 'Return', id: 's2' });
    await inp.waitFor(() => inp.text('ack').find((a) => a.id === 's2'), 'ack s2');
    const ack = inp.text('ack').find((a) => a.id === 's1');
    t.match(ack, { type: 'ack', op: 'keyboard.type' }, 'typed');
    t.equal(ack.result.screenshot, undefined, 'no after-screenshot: the field may show the value');
    for (let i = 0; i < 100 && !fs.readFileSync(out, 'utf8').includes('\n'); i++) await new Promise((r) => setTimeout(r, 50));
    t.equal(fs.readFileSync(out, 'utf8'), `${SECRET_VALUE}\n`, 'the stored value reached the keyboard');

    inp.sendJson({ type: 'keyboard.type', fence: f1, secret: 'NO_SUCH', id: 'e1' });
    inp.sendJson({ type: 'keyboard.type', fence: f1, secret: 'SITE_PASSWORD', text: 'both', id: 'e2' });
    inp.sendJson({ type: 'keyboard.type', fence: f1, id: 'e3' });
    await inp.waitFor(() => inp.text('error').find((e) => e.id === 'e3'), 'error e3');
    t.equal(inp.text('error').find((e) => e.id === 'e1')?.code, 'not_found', 'an unknown secret');
    t.equal(inp.text('error').find((e) => e.id === 'e2')?.code, 'invalid_request', 'text and secret together');
    t.equal(inp.text('error').find((e) => e.id === 'e3')?.code, 'invalid_request', 'neither');
    t.notOk(JSON.stringify(inp.texts).includes(SECRET_VALUE), 'no message on the socket carries the value');
    await inp.close();
    xterm.kill('SIGKILL');
  });

  await t.test('forced takeover mid-stream: exactly one lease_lost, nothing applied afterwards', async (t) => {
    const other = await g.rig.key(g.tenant.cookie, ['machines:read', 'machines:control', 'sessions:write']);
    const s2 = await session(other.key);
    const old = await open(inputUrl(s1), g.auth);
    // A steady stream of moves from the old holder along y = 200.
    let i = 0;
    let streaming = true;
    const pump = (async () => {
      while (streaming && !old.closed) {
        old.sendJson({ type: 'mouse.move', fence: f1, x: 10 + (i % 500), y: 200, id: `o${i}` });
        i++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await old.waitFor(() => old.text('ack').length >= 10, 'old holder applying input');
    const f2 = await acquire(other.key, s2, true);
    t.equal(f2, f1 + 1, 'the takeover increments the fence');
    await old.waitFor(() => old.text('lease_lost').length, 'lease_lost');
    // Keep sending for a while after the loss, with the old fence and with the new one.
    const sentAtLoss = i;
    await new Promise((r) => setTimeout(r, 200));
    streaming = false;
    await pump;
    for (let k = 0; k < 5; k++) old.sendJson({ type: 'mouse.move', fence: f2, x: 700, y: 700, id: `guess${k}` });
    t.ok(i > sentAtLoss, 'the old holder kept sending after the loss');

    const neu = await open(inputUrl(s2), { authorization: `Bearer ${other.key}` });
    neu.sendJson({ type: 'mouse.move', fence: f2, x: 640, y: 400, id: 'n1' });
    await neu.waitFor(() => neu.text('ack').find((a) => a.id === 'n1'), 'new holder ack');
    // Sync point: a ping is answered only after every earlier message on that socket was handled.
    await new Promise<void>((resolve) => {
      old.ws.once('pong', () => resolve());
      old.ws.ping();
    });
    // And wait for anything the old socket still had in flight towards the agent to settle.
    await new Promise((r) => setTimeout(r, 300));
    t.same(await pointer(), { x: 640, y: 400 }, "no input from the old holder was applied after the new holder's");
    t.equal(old.text('lease_lost').length, 1, 'exactly one lease_lost');
    t.match(old.text('lease_lost')[0], { type: 'lease_lost', fence: f2 });
    const lostAt = old.all.findIndex((m) => !Buffer.isBuffer(m) && m.type === 'lease_lost');
    t.notOk(old.all.slice(lostAt + 1).some((m: any) => m.type === 'ack'), 'no ack follows lease_lost');
    t.notOk(old.all.some((m: any) => typeof m.id === 'string' && m.id.startsWith('guess') && m.type === 'ack'), 'a guessed fence is not applied');
    t.equal(old.closed, null, 'the old socket stays open, read-only');
    await Promise.all([old.close(), neu.close()]);

    // A message carrying a higher fence than the current one: dropped, one lease_lost, then read-only.
    const again = await open(inputUrl(s2), { authorization: `Bearer ${other.key}` });
    again.sendJson({ type: 'mouse.move', fence: f2 + 1, x: 5, y: 5, id: 'high' });
    await again.waitFor(() => again.text('lease_lost').length, 'lease_lost for a higher fence');
    again.sendJson({ type: 'mouse.move', fence: f2, x: 6, y: 6, id: 'after' });
    again.sendJson({ type: 'mouse.move', fence: f2 - 1, x: 7, y: 7, id: 'lower' });
    await new Promise<void>((resolve) => {
      again.ws.once('pong', () => resolve());
      again.ws.ping();
    });
    await new Promise((r) => setTimeout(r, 200));
    t.equal(again.text('lease_lost').length, 1, 'still exactly one');
    t.equal(again.text('ack').length, 0, 'nothing applied on a socket that lost the lease');
    t.same(await pointer(), { x: 640, y: 400 });
    await again.close();
  });

  await t.test('per-socket rate limit', async (t) => {
    const s3 = await session(g.tenant.key);
    const f3 = await acquire(g.tenant.key, s3, true);
    const c = await open(inputUrl(s3), g.auth);
    for (let k = 0; k < 1000; k++) c.sendJson({ type: 'mouse.move', fence: f3, x: 1 + (k % 100), y: 300, id: `r${k}` });
    const limited = await c.waitFor(() => c.text('error').find((e) => e.code === 'rate_limited'), 'rate_limited');
    t.match(limited.message, /200 messages per second/, 'a clear message naming the limit');
    await c.waitFor(() => c.text('ack').length >= 200, 'the burst is applied');
    t.ok(c.text('ack').length < 1000, `messages over the limit are dropped (${c.text('ack').length} of 1000 applied)`);
    // Not a crash: after a pause the same socket works again.
    await new Promise((r) => setTimeout(r, 1100));
    c.sendJson({ type: 'mouse.move', fence: f3, x: 321, y: 123, id: 'later' });
    await c.waitFor(() => c.text('ack').find((a) => a.id === 'later'), 'ack later');
    t.same(await pointer(), { x: 321, y: 123 });
    t.equal(c.closed, null);
    await c.close();
  });

  await t.test('handshake refusals', async (t) => {
    const reader = await g.rig.key(g.tenant.cookie, ['machines:read', 'sessions:write']);
    t.match(await connect(inputUrl(s1), { authorization: `Bearer ${reader.key}` }), { status: 403, body: { error: { code: 'permission_denied' } } });
    t.match(await connect(`${g.wsBase}${base}/input`, g.auth), { status: 400, body: { error: { details: [{ field: 'session_id' }] } } });
    t.match(await connect(inputUrl('ses_nosuchsession000000000000'), g.auth), { status: 404 });
    const other = await g.rig.key(g.tenant.cookie, ['machines:control', 'sessions:write']);
    t.match(await connect(inputUrl(s1), { authorization: `Bearer ${other.key}` }), { status: 403 }, "another key's session");
    const view = (await g.rig.call('POST', '/v1/sessions', { key: g.tenant.key, body: { machine_id: g.machineId, type: 'view' } })).json.id;
    t.match(await connect(inputUrl(view), g.auth), { status: 403 }, 'a view session cannot send input');
    const closed = await session(g.tenant.key);
    await g.rig.call('DELETE', `/v1/sessions/${closed}`, { key: g.tenant.key });
    t.match(await connect(inputUrl(closed), g.auth), { status: 409 }, 'a closed session');
    const ok = await connect(inputUrl(s1), g.auth);
    t.ok(ok instanceof WsClient, 'an own session not holding the lease may connect');
    await (ok as WsClient).close();
  });

  await t.test('the gateway log holds no typed text, key, session or query', async (t) => {
    const logged = JSON.stringify(g.gatewayLogs);
    t.ok(g.gatewayLogs.some((l) => l.event === 'ws' && l.channel === 'input'), 'one line per channel socket');
    t.ok(g.gatewayLogs.some((l) => l.event === 'ws_refused' && l.status === 403), 'refusals are logged by status');
    const never: Record<string, string> = {
      'typed text': 'hello gateway', 'a secret typed by reference': SECRET_VALUE, 'the API key': g.tenant.key, 'the session id': s1, 'the query': 'session_id',
    };
    for (const [what, v] of Object.entries(never)) t.notOk(logged.includes(v), `never logged: ${what}`);
  });
});

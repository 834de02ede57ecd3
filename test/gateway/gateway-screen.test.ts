/**
 * Screen channel with real ws clients through the real control plane to the real agent's screen stream
 * on a real Xvfb: shared agent stream, status and frames, desktop down → compute_unavailable → frames
 * again, machine stop/start, and a stalled viewer that must not slow another.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { xrun } from '../helpers/desktop-agent.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { connect, open, WsClient } from '../helpers/gateway-ws.js';

const MAX_BUFFERED = 256 * 1024;

t.test('screen channel', { timeout: 180_000 }, async (t) => {
  const g = await startGatewayRig(t, { gateway: { screen: { maxBuffered: MAX_BUFFERED, retryMs: 200 } } });
  await g.desktopUp();
  const base = `/v1/machines/${g.machineId}`;
  const screenUrl = (q: string) => `${g.wsBase}${base}/screen?${q}`;
  const isJpeg = (b: Buffer) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff;
  const children: ChildProcess[] = [];
  t.teardown(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });

  await t.test('viewers share one agent stream; frames follow screen changes', async (t) => {
    await xrun(g.xvfb.display, 'xsetroot', ['-solid', '#0000ff']);
    const a = await open(screenUrl('format=jpeg&quality=50&fps=10'), g.auth);
    const st = await a.waitFor(() => a.text('status').find((s) => s.up), 'status up');
    t.match(st, { type: 'status', up: true, format: 'jpeg', code: null });
    t.ok(st.width > 0 && st.height > 0, 'the resolution is announced');
    await a.waitFor(() => a.binaries.length >= 1, 'first frame');
    t.ok(isJpeg(a.binaries[0]!), 'binary messages are JPEG images');

    const b = await open(screenUrl('format=jpeg&quality=50&fps=10'), g.auth);
    await b.waitFor(() => b.binaries.length >= 1, 'a late viewer gets the current frame at once');
    const streams = g.gateway.screenStreams();
    t.equal(streams.length, 1, 'one agent stream');
    t.equal(streams[0]!.viewers, 2, 'shared by both viewers');

    const before = a.binaries.length;
    const bBefore = b.binaries.length;
    await xrun(g.xvfb.display, 'xsetroot', ['-solid', '#ffff00']);
    await a.waitFor(() => a.binaries.length > before, 'frame after change');
    await b.waitFor(() => b.binaries.length > bBefore, 'frame after change (b)');
    t.notOk(a.binaries[a.binaries.length - 1]!.equals(a.binaries[before - 1]!), 'the new frame differs');

    const webp = await open(screenUrl('format=webp&quality=30&fps=5'), g.auth);
    await webp.waitFor(() => webp.binaries.length >= 1, 'webp frame');
    t.equal(webp.binaries[0]!.subarray(8, 12).toString('latin1'), 'WEBP', 'other parameters get their own stream');
    t.equal(g.gateway.screenStreams().length, 2);

    await Promise.all([a.close(), b.close(), webp.close()]);
    for (let i = 0; i < 100 && g.gateway.screenStreams().length; i++) await new Promise((r) => setTimeout(r, 20));
    t.equal(g.gateway.screenStreams().length, 0, 'the agent streams end with their last viewer');
  });

  await t.test('compute_unavailable while the desktop is down, frames once it is up', async (t) => {
    const fb = path.join(g.xvfb.fbdir, 'Xvfb_screen0');
    const hidden = `${fb}.hidden`;
    const live = await open(screenUrl('format=jpeg&quality=40&fps=10'), g.auth);
    await live.waitFor(() => live.binaries.length >= 1, 'frame');
    // The agent's desktop check needs the framebuffer file: without it the desktop is down.
    fs.renameSync(fb, hidden);
    t.teardown(() => fs.existsSync(hidden) && fs.renameSync(hidden, fb));
    const down = await live.waitFor(() => live.text('status').find((s) => !s.up), 'status down');
    t.match(down, { type: 'status', up: false, code: 'compute_unavailable' });

    // A viewer arriving while it is down: the agent refuses the stream (503); the viewer is told and waits.
    const late = await open(screenUrl('format=jpeg&quality=41&fps=10'), g.auth);
    const lateDown = await late.waitFor(() => late.text('status')[0], 'first status');
    t.match(lateDown, { up: false, code: 'compute_unavailable' });
    t.equal(late.binaries.length, 0, 'no frames while down');

    fs.renameSync(hidden, fb);
    const framesBefore = live.binaries.length;
    await live.waitFor(() => live.text('status').filter((s) => s.up).length >= 2, 'status up again');
    await xrun(g.xvfb.display, 'xsetroot', ['-solid', '#00ff00']);
    await live.waitFor(() => live.binaries.length > framesBefore, 'frames again');
    await late.waitFor(() => late.text('status').find((s) => s.up), 'late viewer: up');
    await late.waitFor(() => late.binaries.length >= 1, 'late viewer: frames');
    t.pass('both viewers get frames once the desktop is up');

    // A stopped machine: no frames, compute_unavailable; started again: frames.
    t.equal((await g.api('POST', `${base}/stop`)).status, 200);
    await late.waitFor(() => late.text('status').filter((s) => !s.up).length >= 2, 'down on stop');
    t.equal((await g.api('POST', `${base}/start`)).status, 200);
    await late.waitFor(() => late.text('status').filter((s) => s.up).length >= 2, 'up after start');
    const n = late.binaries.length;
    await xrun(g.xvfb.display, 'xsetroot', ['-solid', '#ff00ff']);
    await late.waitFor(() => late.binaries.length > n, 'frames after start');
    t.pass('frames after a stop and start');
    await Promise.all([live.close(), late.close()]);
  });

  await t.test('a stalled viewer gets frames dropped and does not slow another', async (t) => {
    const stalled = await open(screenUrl('format=jpeg&quality=95&fps=15'), g.auth);
    const healthy = await open(screenUrl('format=jpeg&quality=95&fps=15'), g.auth);
    await stalled.waitFor(() => stalled.binaries.length >= 1, 'first frame');
    await healthy.waitFor(() => healthy.binaries.length >= 1, 'first frame (healthy)');
    // Stop reading on the stalled client's TCP socket: its server-side buffer fills up.
    (stalled.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    // Random text scrolling over the whole screen: every frame is large and different.
    const xterm = spawn('xterm', ['-geometry', '400x130+0+0', '-e', 'sh', '-c', 'while :; do head -c 30000 /dev/urandom | base64; sleep 0.03; done'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DISPLAY: g.xvfb.display }, stdio: 'ignore',
    });
    children.push(xterm);
    const start = healthy.binaries.length;
    await healthy.waitFor(() => healthy.binaries.length >= start + 40, '40 more frames at the healthy viewer', 60_000);
    const info = g.gateway.screenStreams().find((s) => s.key.endsWith('|jpeg|95|15|frames'))!;
    t.ok(info.dropped > 0, `frames were dropped for the stalled viewer (${info.dropped})`);
    const biggest = Math.max(...healthy.binaries.map((b) => b.length));
    for (const b of info.buffered) t.ok(b <= MAX_BUFFERED + biggest, `unsent bytes stay bounded (${b} <= ${MAX_BUFFERED} + one frame)`);
    t.ok(info.buffered.some((b) => b > 0), 'the stalled viewer really is behind');
    xterm.kill('SIGKILL');
    await new Promise((r) => xterm.once('exit', r));
    // Once it reads again it catches up to the newest picture, not a backlog of old ones.
    const last = await healthy.waitFor(() => {
      const n = healthy.binaries.length;
      return n ? healthy.binaries[n - 1] : null;
    }, 'last frame');
    (stalled.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await xrun(g.xvfb.display, 'xsetroot', ['-solid', '#123456']);
    await healthy.waitFor(() => !healthy.binaries[healthy.binaries.length - 1]!.equals(last), 'frame after xsetroot');
    const newest = healthy.binaries[healthy.binaries.length - 1]!;
    await stalled.waitFor(() => stalled.binaries.some((b) => b.equals(newest)), 'stalled viewer catches up to the newest frame', 60_000);
    t.ok(stalled.binaries.length < healthy.binaries.length, `the stalled viewer got fewer frames (${stalled.binaries.length} < ${healthy.binaries.length})`);
    await Promise.all([stalled.close(), healthy.close()]);
  });

  await t.test('refusals before the upgrade use the API envelope', async (t) => {
    const anon = await connect(screenUrl(''));
    t.notOk(anon instanceof WsClient);
    t.match(anon, { status: 401, body: { error: { code: 'unauthenticated', details: [] } } });
    const bad = await connect(screenUrl('format=png'), g.auth);
    t.match(bad, { status: 400, body: { error: { code: 'invalid_request' } } });
    t.equal((bad as any).body.error.details[0].field, 'format', 'details name the query parameter');
    const unknownParam = await connect(screenUrl('fps=5&zoom=2'), g.auth);
    t.equal((unknownParam as any).status, 400, 'unknown query parameters are refused');
    const reader = await g.rig.key(g.tenant.cookie, ['machines:read']);
    const ro = await open(screenUrl(''), { authorization: `Bearer ${reader.key}` });
    await ro.waitFor(() => ro.text('status').length, 'status');
    t.pass('reading the screen needs membership only');
    await ro.close();
    // The session cookie works only from a recognised Origin (cross-site WebSocket hijacking).
    const noOrigin = await connect(screenUrl(''), { cookie: g.tenant.cookie });
    t.match(noOrigin, { status: 403, body: { error: { code: 'permission_denied' } } });
    const evil = await connect(screenUrl(''), { cookie: g.tenant.cookie, origin: 'https://evil.example' });
    t.equal((evil as any).status, 403);
    const own = await open(screenUrl(''), { cookie: g.tenant.cookie, origin: new URL(g.rig.config.publicBaseUrl).origin });
    await own.waitFor(() => own.text('status').length, 'status');
    t.pass('cookie + recognised Origin is accepted');
    await own.close();
    const foreign = await g.rig.tenant('developer');
    t.match(await connect(screenUrl(''), { authorization: `Bearer ${foreign.key}` }), { status: 404, body: { error: { code: 'not_found' } } });
    t.match(await connect(`${g.wsBase}/v1/machines/${g.machineId}/nope`, g.auth), { status: 404 });
    t.match(await connect(`${g.wsBase}/v1/machines/mch_nope/screen`, g.auth), { status: 404 });
  });
});

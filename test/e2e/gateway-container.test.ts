/**
 * The gateway end to end on the container substrate: the real guest image and agent, the real control
 * plane on 127.0.0.1, real ws clients. A terminal with every byte value both ways and the 4409 refusal;
 * screen frames that change after input sent on the input channel; a forced lease takeover mid-stream.
 * Needs root, podman and runc; the image is built on first use (minutes), then cached.
 */
import t from 'tap';
import { serveOnContainers } from '../helpers/container-served.js';
import { open, WsClient, connect } from '../helpers/gateway-ws.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

t.test('gateway end to end on the container substrate', { timeout: 1_200_000 }, async (t) => {
  const { rig, served, created } = await serveOnContainers(t, 'gwe-');
  const wsBase = served.wsBase;

  const a = await rig.tenant('developer');
  const auth = { authorization: `Bearer ${a.key}` };
  const m = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'gw-e2e' } });
  t.equal(m.status, 201, 'machine created');
  created.push(m.json.id);
  const base = `/v1/machines/${m.json.id}`;
  let display: any = null;
  for (let i = 0; i < 240 && !display?.up; i++) {
    const r = await rig.call('GET', `${base}/display`, { key: a.key });
    if (r.status === 200) display = r.json;
    else await new Promise((res) => setTimeout(res, 500));
  }
  t.ok(display?.up, 'the desktop came up');

  // --- terminal -------------------------------------------------------------------------------
  const term = await rig.call('POST', `${base}/terminals`, {
    key: a.key, body: { command: ['sh', '-c', "stty raw -echo -iexten; echo READY; head -c 512 > /tmp/in.bin; printf 'BEGIN>'; cat /tmp/in.bin; printf '<END'; read x"] },
  });
  t.equal(term.status, 200, 'terminal opened');
  const attachUrl = `${wsBase}${base}/terminals/${term.json.id}/attach`;
  const c = await open(attachUrl, auth);
  const out = () => Buffer.concat(c.binaries);
  await c.waitFor(() => out().includes('READY'), 'READY', 60_000);
  const second = await connect(attachUrl, auth);
  t.ok(second instanceof WsClient);
  t.equal((await (second as WsClient).closedP).code, 4409, 'a second client is refused with 4409');
  c.ws.send(all);
  c.ws.send(all);
  const got = await c.waitFor(() => (out().includes('<END') ? out() : null), '<END', 60_000);
  const start = got.indexOf('BEGIN>') + 'BEGIN>'.length;
  t.ok(got.subarray(start, got.lastIndexOf('<END')).equals(Buffer.concat([all, all])), 'every byte value made the round trip through the guest pty');
  c.ws.send(Buffer.from('\n'));
  t.equal((await c.closedP).code, 1000, 'the pty exiting closes the socket');
  t.same(c.text('exit'), [{ type: 'exit', exit_code: 0 }]);

  // --- screen and input ----------------------------------------------------------------------
  const s1 = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.json.id, type: 'agent' } })).json.id;
  const f1 = (await rig.call('POST', `${base}/input-lease`, { key: a.key, body: { session_id: s1 } })).json.fence;
  const viewer = await open(`${wsBase}${base}/screen?format=jpeg&quality=60&fps=10`, auth);
  await viewer.waitFor(() => viewer.text('status').find((s) => s.up), 'status up', 60_000);
  t.match(viewer.text('status').find((s) => s.up), { width: 1280, height: 800 }, 'the resolution is announced');
  await viewer.waitFor(() => viewer.binaries.length >= 1, 'first frame', 60_000);
  const inp = await open(`${wsBase}${base}/input?session_id=${s1}`, auth);
  let settled = viewer.binaries.length;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    if (viewer.binaries.length === settled) break;
    settled = viewer.binaries.length;
  }
  const before = viewer.binaries[viewer.binaries.length - 1]!;
  // A right click on the desktop opens openbox's root menu.
  inp.sendJson({ type: 'mouse.click', fence: f1, at: { x: 300, y: 300 }, button: 'right', id: 'menu' });
  await inp.waitFor(() => inp.text('ack').find((x) => x.id === 'menu'), 'ack', 60_000);
  await viewer.waitFor(() => viewer.binaries.length > settled, 'a frame after the click', 60_000);
  t.notOk(viewer.binaries[viewer.binaries.length - 1]!.equals(before), 'the input changed the screen');
  inp.sendJson({ type: 'keyboard.key', fence: f1, key: 'Escape', id: 'esc' });
  await inp.waitFor(() => inp.text('ack').find((x) => x.id === 'esc'), 'ack esc', 60_000);

  // --- forced takeover mid-stream --------------------------------------------------------------
  let i = 0;
  let pumping = true;
  const pump = (async () => {
    while (pumping && !inp.closed) {
      inp.sendJson({ type: 'mouse.move', fence: f1, x: 10 + (i % 500), y: 100, id: `o${i++}` });
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  await inp.waitFor(() => inp.text('ack').length >= 10, 'old holder applying input', 60_000);
  const other = await rig.key(a.cookie, ['machines:control', 'sessions:write']);
  const s2 = (await rig.call('POST', '/v1/sessions', { key: other.key, body: { machine_id: m.json.id, type: 'agent' } })).json.id;
  const f2 = (await rig.call('POST', `${base}/input-lease`, { key: other.key, body: { session_id: s2, force: true } })).json.fence;
  t.equal(f2, f1 + 1);
  await inp.waitFor(() => inp.text('lease_lost').length, 'lease_lost', 60_000);
  await new Promise((r) => setTimeout(r, 300));
  pumping = false;
  await pump;
  await new Promise<void>((resolve) => {
    inp.ws.once('pong', () => resolve());
    inp.ws.ping();
  });
  t.equal(inp.text('lease_lost').length, 1, 'exactly one lease_lost');
  const lostAt = inp.all.findIndex((x: any) => !Buffer.isBuffer(x) && x.type === 'lease_lost');
  t.notOk(inp.all.slice(lostAt + 1).some((x: any) => x.type === 'ack'), 'nothing applied after it');
  const neu = await open(`${wsBase}${base}/input?session_id=${s2}`, { authorization: `Bearer ${other.key}` });
  neu.sendJson({ type: 'mouse.move', fence: f2, x: 640, y: 400, id: 'n' });
  const ack = await neu.waitFor(() => neu.text('ack').find((x) => x.id === 'n'), 'new holder ack', 60_000);
  t.same(ack.result.pointer, { x: 640, y: 400 }, 'the new holder drives the pointer');
  await Promise.all([inp.close(), neu.close(), viewer.close()]);
});

/**
 * /v1 against the REAL agent running on this host (real Xvfb desktop, real files service with its
 * denylist, real exec and ptys), reached through the fake substrate's channel: proves the proxy,
 * lease gate and error relay with every agent route group. The container end to end
 * (test/e2e/machines-container.test.ts) repeats the walkthrough inside a real guest.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { Enrollment } from '../../agent/src/enrollment.js';
import { createAgentApp } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { createDesktop } from '../../agent/src/desktop/desktop.js';
import { createFileService } from '../../agent/src/files/service.js';
import { createPtyManager } from '../../agent/src/pty/manager.js';
import { desktopRoutes } from '../../agent/src/routes/desktop.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { terminalsRoutes } from '../../agent/src/routes/terminals.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { startXvfb } from '../helpers/xvfb.js';

t.test('the /v1 machine routes against the real agent', { timeout: 180_000 }, async (t) => {
  const xvfb = await startXvfb();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-real-agent-'));
  const channel = path.join(dir, 'agent.sock');
  // A secret as the container substrate drops it beside the socket: denied with the channel directory.
  const enrollFile = path.join(dir, 'enroll');
  fs.writeFileSync(enrollFile, 'enroll-secret-' + 'q'.repeat(30), { mode: 0o600 });
  const desktop = await createDesktop({ display: xvfb.display, fbdir: xvfb.fbdir, log: () => {}, browser: { command: 'chromium', sandbox: false, userName: 'agent' } });
  const ptys = createPtyManager({ display: xvfb.display });
  let server: ReturnType<typeof createAgentServer> | null = null;
  // The agent starts when the control plane first dials the machine, as in a guest, and is enrolled then.
  const sub: FakeSubstrate = new FakeSubstrate({
    channelHandler: (id: string, end: Duplex) => {
      if (!server) {
        const files = createFileService({ deny: { channelPaths: [channel, dir] } });
        // One root FileService for both users: this file tests file semantics, not the user switch (files-user.test.ts).
        const app = createAgentApp({ enrollment: new Enrollment({ kind: 'channel' }), log: () => {}, mounts: [desktopRoutes(desktop), filesRoutes({ root: files, agent: files }), execRoutes({ display: xvfb.display }), terminalsRoutes(ptys)] });
        server = createAgentServer(app, () => {});
      }
      server.emit('connection', end);
    },
  });
  const rig = await makeMachinesRig({ substrate: sub });
  t.teardown(async () => {
    await rig.close();
    server?.close();
    ptys.closeAll?.();
    desktop.close();
    await xvfb.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const a = await rig.tenant('developer');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'real' } })).json;
  t.equal(m.state, 'running');
  const base = `/v1/machines/${m.id}`;
  let display: any = null;
  for (let i = 0; i < 100 && !display; i++) {
    const r = await rig.call('GET', `${base}/display`, { key: a.key });
    if (r.status === 200) display = r.json;
    else await new Promise((res) => setTimeout(res, 100));
  }
  t.ok(display?.up, 'display up');

  const shot = await rig.call('GET', `${base}/screenshot?format=jpeg`, { key: a.key });
  t.equal(shot.status, 200);
  t.same([...Buffer.from(shot.json.image, 'base64').subarray(0, 3)], [0xff, 0xd8, 0xff], 'JPEG through /v1');
  t.notOk('view' in shot.json, 'no view unless asked for');
  const scaled = await rig.call('GET', `${base}/screenshot?format=png&region=0,0,${display.width},${display.height}&width=${display.width / 2}`, { key: a.key });
  t.equal(scaled.status, 200);
  t.same(scaled.json.view.scale, { x: 0.5, y: 0.5 }, 'extension: a scaled screenshot through /v1 says its scale');
  assertEnvelope(t, await rig.call('GET', `${base}/screenshot?region=0,0,${display.width + 1},10`, { key: a.key }), 'invalid_request', 400);

  const s = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const lease = (await rig.call('POST', `${base}/input-lease`, { key: a.key, body: { session_id: s } })).json;
  const input = { 'x-session-id': s, 'x-lease-fence': String(lease.fence) };
  const moved = await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: { x: 100, y: 50 }, headers: input });
  t.equal(moved.status, 200);
  t.same(moved.json.pointer, { x: 100, y: 50 }, 'the real pointer moved');
  assertEnvelope(t, await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: { x: 1, y: 1 } }), 'invalid_request', 400);
  const off = await rig.call('POST', `${base}/mouse/click`, { key: a.key, body: { at: { x: display.width + 10, y: 10 } }, headers: input });
  assertEnvelope(t, off, 'invalid_request', 400);
  const shiftClick = await rig.call('POST', `${base}/mouse/click`, { key: a.key, body: { at: { x: 20, y: 20 }, modifiers: ['shift', 'ctrl'] }, headers: input });
  t.equal(shiftClick.status, 200, 'extension: a click with modifiers through /v1');
  const settled = await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: { x: 30, y: 30, settle: { quiet_ms: 50, screenshot: { format: 'jpeg', width: 320 } } }, headers: input });
  t.equal(settled.status, 200);
  t.match(settled.json.settle, { settled: true, screenshot: { format: 'jpeg', view: { width: 320 } } }, 'extension: settle through /v1, with the after-screenshot');
  assertEnvelope(t, await rig.call('POST', `${base}/mouse/scroll`, { key: a.key, body: { direction: 'up', modifiers: ['meta'] }, headers: input }), 'invalid_request', 400);
  t.equal((await rig.call('POST', `${base}/keyboard/type`, { key: a.key, body: { text: 'hi' }, headers: input })).status, 200);
  t.equal((await rig.call('PUT', `${base}/clipboard`, { key: a.key, body: { text: 'via-v1' }, headers: input })).status, 200);
  t.equal((await rig.call('GET', `${base}/clipboard`, { key: a.key })).json.text, 'via-v1');

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-real-files-'));
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const file = path.join(work, 'sub', 'bytes.bin');
  const w = await rig.call('PUT', `${base}/files/content?path=${encodeURIComponent(file)}`, {
    key: a.key, body: { content: Buffer.from([0xff, 0xfe, 0x41]).toString('base64'), encoding: 'base64', user: 'root' },
  });
  t.equal(w.status, 200, 'write');
  const bad = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent(file)}`, { key: a.key });
  assertEnvelope(t, bad, 'invalid_request', 400);
  t.equal(bad.json.error.request_id, bad.headers.get('x-request-id'), "relayed with the control plane's request id");
  const b64 = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent(file)}&encoding=base64`, { key: a.key });
  t.same([...Buffer.from(b64.json.content, 'base64')], [0xff, 0xfe, 0x41]);
  assertEnvelope(t, await rig.call('GET', `${base}/files/content?path=${encodeURIComponent(enrollFile)}`, { key: a.key }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('GET', `${base}/files/content?path=relative`, { key: a.key }), 'invalid_request', 400);

  const ex = await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['id', '-un'] } });
  t.equal(ex.json.stdout, 'agent\n', 'exec as the agent user');

  const term = await rig.call('POST', `${base}/terminals`, { key: a.key, body: { command: ['/bin/sh'] } });
  t.equal(term.status, 200);
  t.ok((await rig.call('GET', `${base}/terminals`, { key: a.key })).json.terminals.some((x: any) => x.id === term.json.id));
  t.equal((await rig.call('POST', `${base}/terminals/${term.json.id}/resize`, { key: a.key, body: { cols: 100, rows: 30 } })).json.cols, 100);
  t.equal((await rig.call('DELETE', `${base}/terminals/${term.json.id}`, { key: a.key })).status, 204);
  assertEnvelope(t, await rig.call('DELETE', `${base}/terminals/${term.json.id}`, { key: a.key }), 'not_found', 404);

  const all = rig.bodies.join('\n');
  t.notOk(all.includes(fs.readFileSync(enrollFile, 'utf8')), 'the secret never appears in a response');
});

/**
 * End to end through /v1 with the container substrate, the real guest image and the real agent: the
 * README walkthrough (signup → checkout/trial → key → create → screenshot → type → exec), lease
 * enforcement on input routes, a denylisted guest path, a non-UTF-8 utf8 read, an off-display click,
 * stop/start with the agent connection re-established, delete.
 * Needs root, podman and runc; the image is built on first use (minutes), then cached.
 */
import t from 'tap';
import { PUBLIC_ORIGIN } from '../helpers/control-plane.js';
import { displayUp, until } from '../helpers/machines-rig.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const READY_TRIES = 240;

t.test('machines API end to end on the container substrate', { timeout: 1_200_000 }, async (t) => {
  const { rig, substrate, root, created } = await containerMachinesRig(t);

  // --- the README walkthrough ---------------------------------------------------------------
  const email = `walk-${Date.now()}@example.com`;
  const signup = await rig.call('POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery staple' } });
  t.equal(signup.status, 201, 'signed up');
  const cookie = `computer_session=${/computer_session=([^;]+)/.exec(signup.headers.get('set-cookie')!)![1]}`;
  const checkout = await rig.call('POST', '/v1/billing/checkout', { cookie, body: { plan_id: 'developer', success_url: `${PUBLIC_ORIGIN}/` } });
  t.equal(checkout.status, 200, 'checkout link');
  t.equal((await rig.call('GET', new URL(checkout.json.url).pathname)).status, 303, 'trial started');
  t.equal((await rig.call('GET', '/v1/billing', { cookie })).json.state, 'trialing');
  const keyRes = await rig.call('POST', '/v1/api-keys', {
    cookie, body: { name: 'walkthrough', scopes: ['machines:read', 'machines:write', 'machines:control', 'sessions:write'] },
  });
  t.equal(keyRes.status, 201);
  const key = keyRes.json.secret as string;

  const create = await rig.call('POST', '/v1/machines', { key, body: { name: 'walkthrough', metadata: { purpose: 'e2e' } } });
  t.equal(create.status, 201, 'created');
  const m = create.json;
  created.push(m.id);
  t.equal(m.state, 'running', 'returns once running');
  const base = `/v1/machines/${m.id}`;

  const display = await displayUp(rig, key, m.id);
  t.match(display, { up: true, width: 1280, height: 800 }, 'the desktop came up');

  const shot = await rig.call('GET', `${base}/screenshot?format=jpeg&quality=70`, { key });
  t.equal(shot.status, 200, 'screenshot');
  const jpeg = Buffer.from(shot.json.image, 'base64');
  t.same([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff], 'a JPEG frame');
  t.match(shot.json.display, { width: 1280, height: 800, up: true });

  const session = await rig.call('POST', '/v1/sessions', { key, body: { machine_id: m.id, type: 'agent' } });
  t.equal(session.status, 201);
  const sid = session.json.id as string;
  const lease = await rig.call('POST', `${base}/input-lease`, { key, body: { session_id: sid, ttl_seconds: 300 } });
  t.equal(lease.status, 200, 'lease acquired');
  const fence = String(lease.json.fence);
  const input = { 'x-session-id': sid, 'x-lease-fence': fence };

  const marker = `/home/agent/marker-${Date.now()}`;
  const click = await rig.call('POST', `${base}/mouse/click`, { key, body: { at: { x: 640, y: 400 } }, headers: input });
  t.equal(click.status, 200, 'click on the desktop');
  t.same(click.json.pointer, { x: 640, y: 400 }, 'the real pointer is where we clicked');
  const typed = await rig.call('POST', `${base}/keyboard/type`, { key, body: { text: 'hello' }, headers: input });
  t.equal(typed.status, 200, 'typed');
  t.match(typed.json, { display: { width: 1280, height: 800 } });
  const keyPress = await rig.call('POST', `${base}/keyboard/key`, { key, body: { key: 'Return' }, headers: input });
  t.equal(keyPress.status, 200, 'key');

  const ex = await rig.call('POST', `${base}/exec`, { key, body: { command: ['sh', '-c', `echo hello from $(id -un) > ${marker}; cat ${marker}`] } });
  t.equal(ex.status, 200, 'exec');
  t.equal(ex.json.stdout, 'hello from agent\n');
  t.equal(ex.json.exit_code, 0);
  const nonZero = await rig.call('POST', `${base}/exec`, { key, body: { command: ['sh', '-c', 'exit 7'] } });
  t.equal(nonZero.status, 200, 'a non-zero exit is a 200');
  t.equal(nonZero.json.exit_code, 7);

  // --- lease enforcement on input routes ---------------------------------------------------
  const inputs: Array<[string, unknown]> = [
    ['mouse/move', { x: 10, y: 10 }], ['mouse/click', { at: { x: 10, y: 10 } }], ['mouse/scroll', { direction: 'down' }],
    ['keyboard/type', { text: 'x' }], ['keyboard/key', { key: 'Tab' }], ['keyboard/hotkey', { keys: ['ctrl', 'a'] }],
    ['browser/open', { url: 'about:blank' }],
  ];
  const other = await rig.call('POST', '/v1/sessions', { key, body: { machine_id: m.id, type: 'agent' } });
  for (const [route, body] of inputs) {
    const none = await rig.call('POST', `${base}/${route}`, { key, body });
    t.equal(none.status, 400, `${route} without X-Session-Id → 400`);
    const notHolder = await rig.call('POST', `${base}/${route}`, { key, body, headers: { 'x-session-id': other.json.id } });
    t.equal(notHolder.status, 409, `${route} from a session without the lease → 409`);
    t.match(notHolder.json.error.message, new RegExp(sid), 'names the holder');
    const stale = await rig.call('POST', `${base}/${route}`, { key, body, headers: { 'x-session-id': sid, 'x-lease-fence': String(Number(fence) - 1) } });
    t.equal(stale.status, 409, `${route} with a stale fence → 409`);
  }
  const clip = await rig.call('PUT', `${base}/clipboard`, { key, body: { text: 'clip-e2e' } });
  t.equal(clip.status, 400, 'clipboard write needs the lease too');
  t.equal((await rig.call('PUT', `${base}/clipboard`, { key, body: { text: 'clip-e2e' }, headers: input })).status, 200, 'clipboard write with the lease');
  const clipRead = await rig.call('GET', `${base}/clipboard?selection=clipboard`, { key });
  t.equal(clipRead.status, 200, 'clipboard read needs no lease');
  t.equal(clipRead.json.text, 'clip-e2e');

  // --- files, denylist, encodings, coordinates ----------------------------------------------
  const w = await rig.call('PUT', `${base}/files/content?path=${encodeURIComponent('/home/agent/e2e/bytes.bin')}`, {
    key, body: { content: Buffer.from([0xff, 0xfe, 0x00, 0x41]).toString('base64'), encoding: 'base64' },
  });
  t.equal(w.status, 200, 'wrote a binary file');
  const asUtf8 = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent('/home/agent/e2e/bytes.bin')}&encoding=utf8`, { key });
  t.equal(asUtf8.status, 400, 'a utf8 read of non-UTF-8 bytes → 400');
  t.equal(asUtf8.json.error.code, 'invalid_request');
  t.equal(asUtf8.json.error.request_id, asUtf8.headers.get('x-request-id'), "the relayed error carries the control plane's request id");
  const asB64 = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent('/home/agent/e2e/bytes.bin')}&encoding=base64`, { key });
  t.same([...Buffer.from(asB64.json.content, 'base64')], [0xff, 0xfe, 0x00, 0x41], 'base64 read returns the bytes');
  t.equal(asB64.json.eof, true);
  const list = await rig.call('GET', `${base}/files?path=${encodeURIComponent('/home/agent/e2e')}`, { key });
  t.same(list.json.entries.map((e: any) => e.name), ['bytes.bin']);

  const denied = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent('/run/computer-channel/enroll')}`, { key });
  t.equal(denied.status, 403, 'the enrollment secret path is denied through /v1');
  t.equal(denied.json.error.code, 'permission_denied');
  const deniedDir = await rig.call('GET', `${base}/files?path=${encodeURIComponent('/run/computer-channel')}`, { key });
  t.equal(deniedDir.status, 403, 'so is its directory');

  const off = await rig.call('POST', `${base}/mouse/click`, { key, body: { at: { x: 5000, y: 10 } }, headers: input });
  t.equal(off.status, 400, 'a click outside the display → 400');
  t.equal(off.json.error.code, 'invalid_request');

  // --- terminals ----------------------------------------------------------------------------
  const term = await rig.call('POST', `${base}/terminals`, { key, body: { command: ['/bin/sh'], cols: 80, rows: 24 } });
  t.equal(term.status, 200, 'terminal opened');
  const terms = await rig.call('GET', `${base}/terminals`, { key });
  t.ok(terms.json.terminals.some((x: any) => x.id === term.json.id), 'listed');
  t.equal((await rig.call('DELETE', `${base}/terminals/${term.json.id}`, { key })).status, 204, 'killed');

  // --- stop/start: the pool reconnects to the restarted agent --------------------------------
  const stopped = await rig.call('POST', `${base}/stop`, { key });
  t.equal(stopped.json.state, 'stopped');
  t.equal((await rig.call('GET', `${base}/input-lease`, { key })).json.held, false, 'stop released the lease');
  t.equal((await rig.call('GET', `${base}/display`, { key })).status, 409, 'a stopped machine has no desktop');
  t.equal((await rig.call('POST', `${base}/start`, { key })).json.state, 'running');
  const again = await until('the agent after start', READY_TRIES, async () => {
    const r = await rig.call('POST', `${base}/exec`, { key, body: { command: ['cat', marker] } });
    return r.status === 200 ? r : r.status === 503 ? null : Promise.reject(new Error(`exec ${r.status} ${r.text}`));
  });
  t.equal(again.json.stdout, 'hello from agent\n', 'the disk survived stop/start and exec works again');

  const evTypes = (await rig.call('GET', `${base}/events?limit=200`, { key })).json.data.map((e: any) => e.type);
  for (const ty of ['machine.created', 'machine.started', 'machine.stopped', 'session.connected', 'session.control_acquired', 'session.control_released']) {
    t.ok(evTypes.includes(ty), `event ${ty} recorded`);
  }

  t.equal((await rig.call('DELETE', base, { key })).status, 204, 'deleted');
  t.equal(await substrate.status(m.id), 'absent', 'gone from the host');

  const all = rig.bodies.join('\n');
  const token = (await rig.store.db.q().selectFrom('machines').select('agent_token').where('id', '=', m.id).executeTakeFirstOrThrow()).agent_token;
  t.notOk(all.includes(token), 'no response carried the guest token');
  t.notOk(all.includes(root), 'no response carried a host path');
});

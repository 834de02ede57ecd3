/**
 * The SDK's gateway helpers against the real control plane served on 127.0.0.1 (API + gateway, SQLite,
 * the real agent on a real Xvfb behind the fake substrate's channel): screen frames as an async iterator,
 * events that resume after a real dropped connection without gaps or repeats, refusals as envelopes.
 */
import sharp from 'sharp';
import t from 'tap';
import { ChannelClosedError, Computer, ComputerError, type EventDelivery } from '../../clients/sdk/src/index.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { tcpProxy } from '../helpers/tcp-proxy.js';

t.test('SDK gateway helpers', { timeout: 180_000 }, async (t) => {
  const g = await startGatewayRig(t, { xvfb: { width: 800, height: 600 } });
  const port = Number(new URL(g.wsBase).port);
  const proxy = await tcpProxy(port);
  t.teardown(() => proxy.close());
  const cx = new Computer({ apiKey: g.tenant.key, baseUrl: `http://127.0.0.1:${proxy.port}` });
  const m = cx.machine(g.machineId);
  await g.desktopUp();

  // --- screen frames ------------------------------------------------------------------------------
  const screen = await m.screenFrames({ format: 'webp', quality: 50, fps: 5 });
  let first: { image: Buffer; format: string; width: number; height: number } | null = null;
  for await (const f of screen) {
    first = f;
    break; // ends the iterator and closes the socket
  }
  t.ok(first, 'a frame');
  t.match(first, { format: 'webp', width: 800, height: 600 });
  const meta = await sharp(first!.image).metadata();
  t.same([meta.format, meta.width, meta.height], ['webp', 800, 600], 'a complete image of the announced format and size');
  t.match(screen.status, { type: 'status', up: true, width: 800, height: 600, format: 'webp' });
  t.same(await screen.next(), { value: undefined, done: true }, 'break closed the stream');

  // A connection cut under the screen stream is an error to the loop, not a silent end.
  const cut = await m.screenFrames();
  await cut.next();
  proxy.drop();
  await t.rejects(cut.next(), ChannelClosedError, 'a dropped screen connection throws');

  // --- events with resume ---------------------------------------------------------------------------
  const base = `/v1/machines/${g.machineId}`;
  const rename = async (n: number) => {
    const r = await g.api('PATCH', base, { name: `sdk-${n}` });
    if (r.status !== 200) throw new Error(`update ${r.status} ${r.text}`);
  };
  const events = await m.events({ maxReconnects: 20 });
  const got: EventDelivery[] = [];
  for (let n = 1; n <= 3; n++) await rename(n);
  for await (const d of events) {
    got.push(d);
    if (got.length === 2) break;
  }
  t.same(got.map((d) => d.event.data.fields), [['name'], ['name']]);
  // `break` closed that iterator: a new one resumes from where this one stopped.
  const accepted = proxy.accepted();
  const resumed = await m.events({ cursor: got[1]!.cursor, maxReconnects: 20 });
  const take = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const r = await resumed.next();
      if (r.done) throw new Error('ended');
      got.push(r.value);
    }
  };
  await take(1); // rename 3
  // The connection is cut; events happen while it is down; the iterator reconnects and resumes.
  proxy.drop();
  for (let n = 4; n <= 6; n++) await rename(n);
  await take(3);
  t.ok(resumed.reconnects >= 1, `reconnected (${resumed.reconnects})`);
  t.ok(proxy.accepted() >= accepted + 2, 'over a new TCP connection');
  await rename(7);
  await take(1);
  resumed.close();
  t.same(await resumed.next(), { value: undefined, done: true }, 'close() ends it');

  // The REST log is the truth: exactly these events, in order, none repeated.
  const log = (await g.api('GET', `${base}/events?limit=100`)).json.data.reverse() as Array<{ id: string; type: string }>;
  const renames = log.filter((e) => e.type === 'machine.updated');
  t.equal(renames.length, 7);
  t.same(got.map((d) => d.event.id), renames.map((e) => e.id), 'seven renames, in log order, no gap, no repeat');
  t.same(got.map((d) => d.cursor), [...new Set(got.map((d) => d.cursor))], 'distinct cursors');

  // --- refusals are the API's envelope; a final close is not retried -------------------------------
  const stranger = new Computer({ apiKey: 'sk_not_a_key', baseUrl: `http://127.0.0.1:${port}` });
  const refused = await stranger.machine(g.machineId).events().catch((e: unknown) => e);
  t.ok(refused instanceof ComputerError);
  t.match(refused, { status: 401, code: 'unauthenticated' });
  const badCursor = await m.events({ cursor: 'bogus!' }).catch((e: unknown) => e);
  t.match(badCursor, { status: 400, code: 'invalid_request', details: [{ field: 'cursor' }] });
  const other = await g.rig.tenant('developer');
  const notMine = await new Computer({ apiKey: other.key, baseUrl: `http://127.0.0.1:${port}` }).machine(g.machineId).screenFrames().catch((e: unknown) => e);
  t.match(notMine, { status: 404, code: 'not_found' });
});

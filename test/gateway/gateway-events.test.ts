/**
 * Events channel with real ws clients through the real control plane and its event log: live and in
 * order, resume from a cursor without gaps or repeats, refusals, egress counted.
 */
import t from 'tap';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { connect, open } from '../helpers/gateway-ws.js';

t.test('events channel', { timeout: 120_000 }, async (t) => {
  const g = await startGatewayRig(t);
  const base = `/v1/machines/${g.machineId}`;
  const eventsUrl = (cursor?: string) => `${g.wsBase}${base}/events/live${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`;
  const rename = async (n: number) => {
    const r = await g.api('PATCH', base, { name: `gw-${n}` });
    if (r.status !== 200) throw new Error(`update ${r.status} ${r.text}`);
  };
  /** The machine's whole log, oldest first, through the REST route. */
  const restLog = async () => {
    const out: any[] = [];
    let cursor: string | null = null;
    do {
      const r: any = await g.api('GET', `${base}/events?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      out.push(...r.json.data);
      cursor = r.json.next_cursor;
    } while (cursor);
    return out.reverse();
  };

  const live = await open(eventsUrl(), g.auth);
  const egressBefore = g.egress.peek(g.machineId);
  for (let n = 1; n <= 5; n++) await rename(n);
  const s = (await g.api('POST', '/v1/sessions', { machine_id: g.machineId, type: 'agent' })).json.id;
  await g.api('POST', `${base}/input-lease`, { session_id: s });
  await g.api('DELETE', `${base}/input-lease`);
  const log = await restLog();
  const expected = log.slice(log.findIndex((x) => x.type === 'machine.updated'));
  await live.waitFor(() => live.texts.length >= expected.length, `${expected.length} events`);
  t.same(live.texts.map((m) => m.event.id), expected.map((e) => e.id), 'live events arrive in log order');
  t.same(live.texts.map((m) => m.event.type).slice(0, 5), Array(5).fill('machine.updated'));
  t.ok(live.texts.some((m) => m.event.type === 'session.control_acquired'), 'lease events stream too');
  t.same(live.texts[0].event, expected[0], 'the event body is the REST one');
  t.ok(g.egress.peek(g.machineId) > egressBefore, 'event bytes are counted as egress');

  // Disconnect in the middle; events happen meanwhile; resume from the last cursor received.
  const resumeFrom = live.texts[2];
  await live.close();
  for (let n = 6; n <= 9; n++) await rename(n);
  const resumed = await open(eventsUrl(resumeFrom.cursor), g.auth);
  const after = (await restLog()).slice(log.findIndex((e) => e.id === resumeFrom.event.id) + 1);
  await resumed.waitFor(() => resumed.texts.length >= after.length, 'catch-up');
  t.same(resumed.texts.map((m) => m.event.id), after.map((e) => e.id), 'resume: every later event, in order, no gap, no repeat');
  await rename(10);
  await resumed.waitFor(() => resumed.texts.length === after.length + 1, 'live after catch-up');
  t.equal(resumed.texts[resumed.texts.length - 1].event.type, 'machine.updated');
  t.equal(resumed.texts[resumed.texts.length - 1].event.data.fields[0], 'name', 'then live events continue');
  // Cursors are strictly increasing along the stream.
  const seqs = resumed.texts.map((m) => Buffer.from(m.cursor, 'base64url').toString());
  t.same(seqs, [...seqs].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))), 'cursors ascend');
  await resumed.close();

  t.match(await connect(eventsUrl('bogus!'), g.auth), { status: 400, body: { error: { code: 'invalid_request', details: [{ field: 'cursor' }] } } });
  // An unknown query parameter on a handshake is named in details (it used to be reported as `(body)`).
  t.match(await connect(`${eventsUrl()}?colour=red`, g.auth), { status: 400, body: { error: { code: 'invalid_request', details: [{ field: 'colour' }] } } });
  t.match(await connect(eventsUrl()), { status: 401 });
  const other = await g.rig.tenant('developer');
  t.match(await connect(eventsUrl(), { authorization: `Bearer ${other.key}` }), { status: 404 });
  const reader = await g.rig.key(g.tenant.cookie, ['machines:read']);
  const ro = await open(eventsUrl(resumeFrom.cursor), { authorization: `Bearer ${reader.key}` });
  await ro.waitFor(() => ro.texts.length >= 1, 'reader gets events');
  t.pass('events need membership only');
  await ro.close();
});

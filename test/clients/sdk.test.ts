/**
 * The SDK against the real control-plane app (every /v1 op, SQLite, the fake substrate with real agent
 * apps): compute_unavailable retried, downloads looped to eof under a cap, lease renewal across a ttl,
 * quota errors as data. The container-substrate run: test/e2e/sdk-container.test.ts.
 */
import { Hono } from 'hono';
import t from 'tap';
import { AGENT_ROUTES } from '../../shared/agent-protocol.js';
import { Computer, ComputerError } from '../../clients/sdk/src/index.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';

const FILE = Buffer.alloc(2 * 1024 * 1024 + 123, 7);
const RANGE = 512 * 1024;
const fake = fakeSubstrateWithAgents({
  // A file route serving FILE in ranges, as the agent does (offset/length/eof).
  mountsFirst: () => {
    const app = new Hono<any>();
    app.get(AGENT_ROUTES['files.read'].path, (c) => {
      const offset = Number(c.req.query('offset') ?? 0);
      const chunk = FILE.subarray(offset, offset + RANGE);
      return c.json({ path: '/f', encoding: 'base64', content: chunk.toString('base64'), offset, length: chunk.length, size: FILE.length, eof: offset + chunk.length >= FILE.length });
    });
    return [app];
  },
});
const rig = await makeMachinesRig({ substrate: fake.substrate });
t.teardown(async () => {
  fake.close();
  await rig.close();
});

t.test('SDK', async (t) => {
  const u = await rig.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'sessions:write']);
  let calls = 0;
  const onRefusal: (() => void)[] = [];
  const cx = new Computer({
    apiKey: u.key,
    baseUrl: 'http://cp.test',
    fetch: (async (url: URL, init: RequestInit) => {
      calls++;
      const res = await rig.app.request(url.toString(), init as RequestInit, { clientIp: '192.0.2.9' });
      // The desktop comes up right after the first refusal, so exactly one retry is needed.
      if (res.status === 503) for (const d of onRefusal.splice(0)) d();
      return res;
    }) as typeof fetch,
  });
  const m = await cx.createMachine({ name: 'sdk-one' });
  t.equal(m.record?.state, 'running');

  // compute_unavailable is retried: the desktop comes up after the first refusal.
  fake.desktopOf(m.id).up = false;
  const before = calls;
  onRefusal.push(() => (fake.desktopOf(m.id).up = true));
  const png = await m.screenshot();
  t.equal(png.toString(), 'frame');
  t.equal(calls - before, 2, 'one refusal, one retry');

  const all = await m.readFile('/f');
  t.equal(all.length, 2 * 1024 * 1024 + 123, 'looped to eof');
  t.ok(all.equals(FILE));
  await t.rejects(m.readFile('/f', { maxBytes: 1024 * 1024 }), /larger than the download cap of 1048576 bytes/);
  t.equal((await m.readFile('/f', { maxBytes: 3 * 1024 * 1024 })).length, FILE.length, 'a raised cap');

  const s = await rig.call('POST', '/v1/sessions', { key: u.key, body: { machine_id: m.id, type: 'agent' } });
  const lease = await m.acquireLease(s.json.id, 5);
  await new Promise((r) => setTimeout(r, 6_500));
  t.ok(lease.renewals >= 2, `renewed at half the ttl (${lease.renewals})`);
  const held = await rig.call('GET', `/v1/machines/${m.id}/input-lease`, { key: u.key });
  t.equal(held.json.held, true, 'still held after more than one ttl');
  await lease.release();

  const err: unknown = await cx.request('GET', '/v1/machines/mch_000000000000000000000000').catch((e: unknown) => e);
  if (!(err instanceof ComputerError)) throw new Error(`expected a ComputerError, got ${String(err)}`);
  t.equal(err.code, 'not_found');
  t.equal(err.quota, null);
  await m.delete();
});

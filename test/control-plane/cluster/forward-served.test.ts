/**
 * The internal forward wired into `serve` (issue 24 item 5): two real control planes (served-child.ts, the fake
 * substrate) on one PostgreSQL sharing ONE DATA_DIR, so one host. Exactly one drives it; machine routes and creates
 * sent to the other are answered by the driver. The proof is the fake substrate: each process has its own, in
 * memory, so a machine made through the non-driver can be started through the driver (and one made through the
 * driver started through the non-driver) only if the driver's substrate made it — were the non-driver serving
 * locally, the other process's substrate would not know the machine. The driver's request log shows the very
 * request id the caller of the non-driver got. kill -9 of the driver: the other takes the host over and serves.
 */
import t from 'tap';
import { startServed, type HttpReply } from '../../helpers/served-processes.js';
import type { PgChild } from '../../helpers/pg-processes.js';

const show = (r: HttpReply) => JSON.stringify(r.json);

t.test('postgres, two processes on one DATA_DIR: one drives, the other forwards to it', async (t) => {
  const s = await startServed(t, 'postgres', { requests: true });
  t.same(s.ready.map((l) => l.driving).sort(), [false, true], 'exactly one of the two drives the host');
  const d = s.ready.findIndex((l) => l.driving === true);
  const n = 1 - d;
  const [driver, other] = [s.children[d]!, s.children[n]!];
  const [atDriver, atOther] = [s.bases[d]!, s.bases[n]!];
  const { key } = await s.tenant('developer');
  const servedBy = (c: PgChild, requestId: string | null) => c.lines.find((l) => l.log === 'request' && l.request_id === requestId && l.forwarded_to === undefined);

  await t.test('a create sent to the non-driver is made by the driver', async (t) => {
    const made = await s.call(atOther, 'POST', '/v1/machines', { key, body: { name: 'via-other', start: false } });
    t.equal(made.status, 201, show(made));
    t.match(made.requestId, /^req_/);
    t.equal(servedBy(driver, made.requestId)?.operation, 'machines.create', 'the driver served it, under the caller\'s request id');
    t.equal(servedBy(other, made.requestId), undefined, 'the non-driver did not serve it');
    t.ok(other.lines.some((l) => l.log === 'request' && l.request_id === made.requestId && typeof l.forwarded_to === 'string'), 'the non-driver forwarded it');
    const started = await s.call(atDriver, 'POST', `/v1/machines/${made.json.id}/start`, { key });
    t.equal(started.status, 200, `the driver's substrate knows the machine: ${show(started)}`);
  });

  await t.test('machine routes sent to the non-driver are served by the driver', async (t) => {
    const made = await s.call(atDriver, 'POST', '/v1/machines', { key, body: { name: 'via-driver', start: false } });
    t.equal(made.status, 201, show(made));
    const started = await s.call(atOther, 'POST', `/v1/machines/${made.json.id}/start`, { key });
    t.equal(started.status, 200, `the non-driver's substrate never saw the machine: ${show(started)}`);
    t.equal(started.json.state, 'running');
    t.equal(servedBy(driver, started.requestId)?.operation, 'machines.start');
    const got = await s.call(atOther, 'GET', `/v1/machines/${made.json.id}`, { key });
    t.equal(got.status, 200, show(got));
    t.equal(got.json.state, 'running');
    t.equal(servedBy(other, got.requestId)?.operation, 'machines.get', 'a read of the store is served where it arrives, never forwarded');
    const missing = await s.call(atOther, 'GET', '/v1/machines/mch_000000000000000000000000', { key });
    t.equal(missing.status, 404, 'an unknown machine is the same 404 from either process');
    const unauthenticated = await s.call(atOther, 'GET', `/v1/machines/${made.json.id}`, {});
    t.equal(unauthenticated.status, 401, 'the arriving process still authenticates before anything is forwarded');
  });

  await t.test("an MCP tool's /v1 call made inside the non-driver is served by the driver", async (t) => {
    // The MCP endpoint dispatches its /v1 calls inside the process (no socket of their own): they cross as a request
    // made there (cluster/forward/forward-fetch.ts), not as the caller's socket.
    const mcp = async (body: unknown, sid?: string) => {
      const res = await fetch(`${atOther}/v1/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(sid ? { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' } : {}) },
        body: JSON.stringify(body),
      });
      return { status: res.status, sid: res.headers.get('mcp-session-id'), json: (await res.json()) as any };
    };
    const init = await mcp({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } } });
    t.equal(init.status, 200, JSON.stringify(init.json));
    const called = await mcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'create_machine', arguments: { name: 'via-mcp', start: false } } }, init.sid!);
    t.equal(called.status, 200);
    t.notOk(called.json.result?.isError, JSON.stringify(called.json));
    const machine = JSON.parse(called.json.result.content[0].text) as { id: string; name: string };
    t.equal(machine.name, 'via-mcp');
    const started = await s.call(atDriver, 'POST', `/v1/machines/${machine.id}/start`, { key });
    t.equal(started.status, 200, `the driver's substrate made it: ${show(started)}`);
    t.equal((await s.call(atDriver, 'POST', `/v1/machines/${machine.id}/stop`, { key })).status, 200, 'stopped again (the plan runs three)');
  });

  await t.test('the internal listener serves nothing unsigned', async (t) => {
    const internal = String(s.ready[n]!.internal);
    t.match(internal, /^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${internal}/v1/machines`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(res.status, 401);
    const body = (await res.json()) as { error: { code: string; message: string } };
    t.same([body.error.code, body.error.message], ['unauthenticated', 'Unauthenticated.']);
    await other.next((l) => l.log === 'forward_refused');
    t.equal(other.lines.find((l) => l.log === 'forward_refused')?.reason, 'missing_header');
  });

  await t.test('kill -9 of the driver: the other takes the host over and serves', async (t) => {
    const before = other.lines.length;
    await driver.kill9();
    await other.next((l) => l.log === 'host.driving', before);
    // Driving now: creates and machine routes are served here, with this process's substrate.
    let made: HttpReply | null = null;
    for (let i = 0; i < 50 && made?.status !== 201; i++) made = await s.call(atOther, 'POST', '/v1/machines', { key, body: { name: `after-${i}`, start: false } });
    t.equal(made?.status, 201, made ? show(made) : 'no answer');
    const started = await s.call(atOther, 'POST', `/v1/machines/${made!.json.id}/start`, { key });
    t.equal(started.status, 200, show(started));
    t.equal(servedBy(other, started.requestId)?.operation, 'machines.start', 'served by the new driver itself');
  });
});

/**
 * The live events channel across two real control-plane processes (main.ts `serve`) on one real PostgreSQL (issue
 * 24 item 3): process A records a machine's events (API calls on A: renames), a gateway client on process B — a
 * real WebSocket on B's listener — receives them in order with no gap; resuming on B from a cursor after a
 * disconnect gets exactly the missed ones; the LISTEN connections killed by pg_terminate_backend are recovered with
 * nothing lost. A has the fake substrate (to create the machine); B has none, so nothing on B records events.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { PUBLIC_ORIGIN } from '../../helpers/control-plane.js';
import { open } from '../../helpers/gateway-ws.js';
import { until } from '../../helpers/machines-rig.js';
import { childGroup, type PgChild } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';

interface Http {
  status: number;
  headers: Headers;
  json: any;
}

function client(port: number) {
  return async (method: string, p: string, o: { key?: string; cookie?: string; body?: unknown } = {}): Promise<Http> => {
    const headers: Record<string, string> = {};
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.cookie) headers.cookie = o.cookie;
    if (o.cookie && method !== 'GET') headers.origin = PUBLIC_ORIGIN;
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`http://127.0.0.1:${port}${p}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body), redirect: 'manual' });
    const text = await res.text();
    return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
  };
}

async function portOf(c: PgChild): Promise<number> {
  return Number((await c.next((l) => typeof l.port === 'number')).port);
}

t.test('events recorded on process A reach a gateway client on process B: in order, resumable, across a killed LISTEN', { timeout: 300_000 }, async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-events-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const start = childGroup(t, { url: server.url });
  // A first: it migrates the empty database before B opens it.
  const a = start('a', { mode: 'serve', dataDir: path.join(dir, 'a'), substrate: true });
  const onA = client(await portOf(a));
  const b = start('b', { mode: 'serve', dataDir: path.join(dir, 'b'), substrate: false });
  const bPort = await portOf(b);
  const onB = client(bPort);

  // A subscribed tenant with an API key, and a running machine, all through A.
  const su = await onA('POST', '/v1/auth/signup', { body: { email: 'ev@example.com', password: 'correct horse battery', name: 'e' } });
  t.equal(su.status, 201);
  const cookie = /^[^;]+/.exec(su.headers.get('set-cookie') ?? '')![0];
  const co = await onA('POST', '/v1/billing/checkout', { cookie, body: { plan_id: 'pro', success_url: `${PUBLIC_ORIGIN}/ok` } });
  t.equal(co.status, 200);
  t.equal((await onA('GET', new URL(co.json.url as string).pathname)).status, 303);
  const k = await onA('POST', '/v1/api-keys', { cookie, body: { name: 'k', scopes: ['machines:read', 'machines:write', 'machines:control'] } });
  t.equal(k.status, 201);
  const key = k.json.secret as string;
  const m = await onA('POST', '/v1/machines', { key, body: { name: 'ev' } });
  t.equal(m.status, 201);
  const base = `/v1/machines/${m.json.id as string}`;
  await until('the machine running', 240, async () => ((await onA('GET', base, { key })).json.state === 'running' ? true : null));

  const rename = async (n: number) => t.equal((await onA('PATCH', base, { key, body: { name: `ev-${n}` } })).status, 200, `rename ${n} on A`);
  /** The newest `n` events of the log (read on A), oldest first. */
  const newest = async (n: number) => ((await onA('GET', `${base}/events?limit=${n}`, { key })).json.data as any[]).reverse();
  const live = (cursor: string) => open(`ws://127.0.0.1:${bPort}${base}/events/live?cursor=${encodeURIComponent(cursor)}`, { authorization: `Bearer ${key}` });

  // B's cursor at the log's newest event (the listing's cursor on B), then five renames on A.
  const head = await onB('GET', `${base}/events?limit=1`, { key });
  t.equal(head.status, 200);
  const ws = await live(head.json.next_cursor as string);
  for (let n = 1; n <= 5; n++) await rename(n);
  await ws.waitFor(() => ws.texts.length >= 5, '5 events on B', 60_000);
  const five = await newest(5);
  t.same(ws.texts.map((x) => x.event.type), ['machine.updated', 'machine.updated', 'machine.updated', 'machine.updated', 'machine.updated']);
  t.same(ws.texts.map((x) => x.event.id), five.map((e) => e.id), 'B delivers A’s events in log order, none missing');

  // Disconnect after the third; three more renames on A; resume on B from the third's cursor.
  await ws.close();
  for (let n = 6; n <= 8; n++) await rename(n);
  const resumed = await live(ws.texts[2].cursor as string);
  await resumed.waitFor(() => resumed.texts.length >= 5, 'the missed 5 on B', 60_000);
  const missed = await newest(5);
  t.same(resumed.texts.map((x) => x.event.id), [ws.texts[3].event.id, ws.texts[4].event.id, ...missed.slice(2).map((e) => e.id)]);
  t.same(resumed.texts.map((x) => x.event.id), missed.map((e) => e.id), 'resume: exactly the missed ones, in order');

  // Kill the LISTEN connections (both processes'); what A records meanwhile still reaches B.
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  t.teardown(() => admin.end());
  const listeners = async () => Number((await admin.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'computer-events'`)).rows[0].n);
  t.equal(await listeners(), 2, 'one LISTEN connection per process');
  const killed = await admin.query(`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'computer-events'`);
  t.same(killed.rows.map((r) => r.ok), [true, true]);
  for (let n = 9; n <= 11; n++) await rename(n);
  await resumed.waitFor(() => resumed.texts.length >= 8, 'the 3 recorded across the kill', 60_000);
  const after = await newest(8);
  t.same(resumed.texts.map((x) => x.event.id), after.map((e) => e.id), 'nothing lost, nothing repeated across the killed LISTEN');
  await until('both LISTEN connections back', 240, async () => ((await listeners()) === 2 ? true : null));
  await resumed.close();

  await a.stop();
  await b.stop();
});

/**
 * The owner cache (cluster/owner-cache.ts, docs/cluster.md "The owner cache"): a process that forwarded a machine's
 * request remembers the driver, and a stale entry never makes an old driver act. Three real `serve()` processes on
 * one PostgreSQL, each on its own DATA_DIR, so three hosts (served-child.ts, the fake substrate); the callers always
 * arrive at Z, a process whose host does not hold the machine. `OWNER_CACHE_MS` is ten minutes, so an entry is
 * still remembered whenever the test asks (no clock in the test). The machine's driver changes under Z's cached
 * entry as a drain's rehome records it (`machines.host_id` moved to another host), then by kill -9 of the driver
 * remembered. Who acted is read from the children's request logs, under the caller's request id: the remembered
 * driver's line is its refusal (503, before any permission or handler), the new driver's the served answer.
 */
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import type { PgChild } from '../../helpers/pg-processes.js';
import { startServed, type HttpReply } from '../../helpers/served-processes.js';

const GIB = 1024 ** 3;
const shape = { cores: 16, memory_bytes: 20 * GIB, disk_bytes: 1000 * GIB };
const show = (r: HttpReply) => JSON.stringify(r.json);

t.test('postgres, three hosts: a cached owner that no longer drives the machine refuses, and the call lands on the new driver', async (t) => {
  const parent = t;
  const s = await startServed(t, 'postgres', { requests: true, hosts: [{ shape }, { shape }, { shape }], env: { OWNER_CACHE_MS: '600000' } });
  const db = await openStoreDb({ databaseUrl: s.url!, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  const hosts = await db.q().selectFrom('hosts').select(['id', 'internal_url']).execute();
  // Each child's host id and process id, by the internal listener it registered.
  const who = s.ready.map((l) => {
    const h = hosts.find((h) => h.internal_url?.startsWith(`${String(l.internal)}/`));
    if (!h?.internal_url) throw new Error('a child registered no host');
    return { hostId: h.id, processId: h.internal_url.slice(String(l.internal).length + 1) };
  });
  const { key } = await s.tenant('pro');
  const made = await s.call(s.bases[0]!, 'POST', '/v1/machines', { key, body: { name: 'm0', start: false } });
  t.equal(made.status, 201, show(made));
  const id = String(made.json.id);
  const hostOf = async () => (await db.q().selectFrom('machines').select('host_id').where('id', '=', id).executeTakeFirstOrThrow()).host_id;
  const on = await hostOf();
  const X = who.findIndex((w) => w.hostId === on);
  t.not(X, -1, 'the machine is on one of the three hosts');
  const [Z, Y] = [0, 1, 2].filter((i) => i !== X) as [number, number];
  const child = (i: number): PgChild => s.children[i]!;
  const lineOf = (i: number, r: HttpReply) => child(i).lines.find((l) => l.log === 'request' && l.request_id === r.requestId && l.forwarded_to === undefined);
  const rehome = (to: number) => db.q().updateTable('machines').set({ host_id: who[to]!.hostId }).where('id', '=', id).execute();
  // A request's log line follows its answer: wait for it where the answer says the child served it (never a clock).
  const logged = async (i: number, r: HttpReply, served: boolean) => {
    if (served) await child(i).next((l) => l.log === 'request' && l.request_id === r.requestId, 0);
  };
  const viaZ = (method: string, p: string, body?: unknown) => s.call(s.bases[Z]!, method, p, { key, ...(body === undefined ? {} : { body }) });

  await t.test('a forward through Z is served by the driver, and Z remembers it', async (t) => {
    const r = await viaZ('PATCH', `/v1/machines/${id}`, { name: 'first' });
    t.equal(r.status, 200, show(r));
    await logged(X, r, r.status === 200);
    t.equal(lineOf(X, r)?.status, 200, 'served by the driver of its host');
    t.equal(child(Z).lines.find((l) => l.log === 'request' && l.request_id === r.requestId)?.forwarded_to, who[X]!.processId, 'Z forwarded it there');
  });

  await t.test('the machine rehomed (a body): the remembered driver refuses, the new one serves, once', async (t) => {
    await rehome(Y);
    const r = await viaZ('PATCH', `/v1/machines/${id}`, { name: 'second' });
    t.equal(r.status, 200, `landed on the new driver, not a retry for the caller: ${show(r)}`);
    t.equal(r.json.name, 'second', 'the body crossed whole the second time');
    await logged(X, r, true);
    await logged(Y, r, r.status === 200);
    t.equal(lineOf(X, r)?.status, 503, 'Z tried the remembered driver, which refused before acting');
    t.equal(lineOf(Y, r)?.status, 200, 'the new driver served it');
    t.equal(child(Y).lines.filter((l) => l.log === 'request' && l.request_id === r.requestId).length, 1, 'served once');
    t.equal(child(Z).lines.find((l) => l.log === 'request' && l.request_id === r.requestId)?.forwarded_to, who[Y]!.processId);
  });

  await t.test('rehomed back (no body): the remembered driver refuses, the old host\'s driver serves', async (t) => {
    if (!parent.passing()) return void t.fail('an earlier step failed, so this one would wait on a line never printed');
    await rehome(X);
    const r = await viaZ('POST', `/v1/machines/${id}/stop`);
    t.not(r.status, 503, show(r));
    await logged(Y, r, true);
    await logged(X, r, r.status !== 503);
    t.equal(lineOf(Y, r)?.status, 503, 'the remembered driver (Y) refused');
    t.equal(lineOf(X, r)?.status, r.status, 'the machine\'s driver answered');
  });

  await t.test('the remembered driver killed: the call lands on the machine\'s new driver', async (t) => {
    if (!parent.passing()) return void t.fail('an earlier step failed, so this one would wait on a line never printed');
    // Z remembers X now. Heartbeats pinned an hour ahead: X's host stays `active` with its dead listener registered.
    await db.q().updateTable('hosts').set({ heartbeat_at: new Date(Date.now() + 3_600_000).toISOString() }).execute();
    await rehome(Y);
    await child(X).kill9();
    const r = await viaZ('PATCH', `/v1/machines/${id}`, { name: 'third' });
    t.equal(r.status, 200, show(r));
    t.equal(r.json.name, 'third');
    await logged(Y, r, r.status === 200);
    t.equal(lineOf(Y, r)?.status, 200, 'served by the new driver');
  });

  await t.test('still remembered and still right: the next call goes straight to the new driver', async (t) => {
    if (!parent.passing()) return void t.fail('an earlier step failed, so this one would wait on a line never printed');
    const r = await viaZ('PATCH', `/v1/machines/${id}`, { name: 'fourth' });
    t.equal(r.status, 200, show(r));
    await logged(Y, r, r.status === 200);
    t.equal(lineOf(Y, r)?.status, 200);
    await logged(Z, r, true);
    const zLine = child(Z).lines.find((l) => l.log === 'request' && l.request_id === r.requestId);
    t.match(zLine, { forwarded_to: who[Y]!.processId, via: 'front', operation: 'machines.update', status: 200 }, 'Z took the short way in (api/forward-front.ts)');
    t.equal((await s.call(s.bases[Y]!, 'GET', `/v1/machines/${id}`, { key })).json.name, 'fourth');
  });

  await t.test('rehomed onto Z itself (a body): the remembered driver refuses, Z serves it with the body it read', async (t) => {
    if (!parent.passing()) return void t.fail('an earlier step failed, so this one would wait on a line never printed');
    await rehome(Z);
    const r = await viaZ('PATCH', `/v1/machines/${id}`, { name: 'fifth' });
    t.equal(r.status, 200, show(r));
    t.equal(r.json.name, 'fifth', 'the body the short way read reached the handler here');
    await logged(Y, r, true);
    await logged(Z, r, r.status === 200);
    t.equal(lineOf(Y, r)?.status, 503, 'Z tried the remembered driver (Y), which refused');
    t.equal(lineOf(Z, r)?.status, 200, 'Z served it itself, under the same request id');
  });
});

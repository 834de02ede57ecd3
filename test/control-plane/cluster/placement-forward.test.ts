/**
 * A create goes to the host placement picks (issue 25 items 2 and 3): three real `serve()` processes on one
 * PostgreSQL, each on its OWN DATA_DIR, so three hosts (served-child.ts, the fake substrate in each, the shapes
 * pinned): A 10 GiB and B 20 GiB in region `default`, C 5 GiB in region `eu` (room for one small machine, 4096 MiB
 * of 0.9 × its memory). Which host a machine lands on is read from the database (`machines.host_id` → the host whose
 * registered internal URL is that child's listener) and from the children's request logs: the host's driver served
 * the create under the caller's request id. Each child's fake substrate is its own, so a machine route answered 200
 * through any process proves its host's driver served it. A fork, of a snapshot or of the disk as it is now, is
 * placed like a create (services/placement.ts `forkHosts`).
 */
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { holdWrites } from '../../helpers/pg-hold.js';
import type { PgChild } from '../../helpers/pg-processes.js';
import { startServed, type HttpReply } from '../../helpers/served-processes.js';

const GIB = 1024 ** 3;
const shape = (gib: number) => ({ cores: 16, memory_bytes: gib * GIB, disk_bytes: 1000 * GIB });
const show = (r: HttpReply) => JSON.stringify(r.json);
const FULL = 'No host has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.';

t.test('postgres, three hosts: creates spread by the ranking, forwarded to the chosen host, every route through any process', async (t) => {
  const s = await startServed(t, 'postgres', { requests: true, hosts: [{ shape: shape(10) }, { shape: shape(20) }, { shape: shape(5), region: 'eu' }] });
  const NAMES = ['A', 'B', 'C'] as const;
  const db = await openStoreDb({ databaseUrl: s.url!, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  // Each host's id, by the child whose listener it registered.
  const hosts = await db.q().selectFrom('hosts').select(['id', 'internal_url']).execute();
  t.equal(hosts.length, 3, 'three DATA_DIRs, three hosts');
  const nameOfHost = new Map(hosts.map((h) => [h.id, NAMES[s.ready.findIndex((l) => h.internal_url?.startsWith(`${String(l.internal)}/`))]]));
  t.same([...nameOfHost.values()].sort(), ['A', 'B', 'C'], 'each child drives its own host');
  const child = (name: string): PgChild => s.children[NAMES.indexOf(name as (typeof NAMES)[number])]!;
  const landedOn = async (id: string) => nameOfHost.get((await db.q().selectFrom('machines').select('host_id').where('id', '=', id).executeTakeFirstOrThrow()).host_id!);
  const served = (r: HttpReply) => (l: Record<string, unknown>) => l.log === 'request' && l.request_id === r.requestId && l.forwarded_to === undefined;
  // Which processes served `r`, once `expected` logged it (a request's log line follows its answer).
  const servedBy = async (r: HttpReply, expected: string) => {
    await child(expected).next(served(r), 0);
    return NAMES.filter((n) => child(n).lines.some(served(r)));
  };
  const { key, cookie } = await s.tenant('pro');
  const answers: HttpReply[] = [];
  const create = async (at: number, body: Record<string, unknown>) => {
    const r = await s.call(s.bases[at]!, 'POST', '/v1/machines', { key, body });
    answers.push(r);
    return r;
  };
  const made: Array<{ id: string; host: string }> = [];

  await t.test('a region hint steers; an unknown region is 400 where it arrives', async (t) => {
    const eu = await create(0, { name: 'eu-1', region: 'eu' });
    t.equal(eu.status, 201, show(eu));
    t.equal(await landedOn(eu.json.id), 'C', 'the only eu host');
    t.same(await servedBy(eu, 'C'), ['C'], "C's driver made it, under the caller's request id");
    made.push({ id: eu.json.id, host: 'C' });
    const mars = await create(1, { name: 'mars', region: 'mars' });
    t.equal(mars.status, 400, show(mars));
    t.same([mars.json.error.code, mars.json.error.message], ['invalid_request', 'No host serves region mars; name a region the deployment has, or omit region to place the machine anywhere.']);
    t.same(await servedBy(mars, 'B'), ['B'], 'answered where it arrived');
    t.notOk(child('B').lines.some((l) => l.request_id === mars.requestId && typeof l.forwarded_to === 'string'), 'never forwarded');
    const euFull = await create(2, { name: 'eu-2', region: 'eu' });
    t.equal(euFull.status, 503, show(euFull));
    t.equal(euFull.json.error.message, 'No host in region eu has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.');
  });

  await t.test('a fixed sequence lands by the ranking (most free memory after the machine), whichever process it reaches', async (t) => {
    // Usable: A 9216 MiB, B 18432 MiB, C full. Each create arrives at A, B, C in turn: C is full and never takes one.
    const landed: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await create(i % 3, { name: `m-${i}` });
      t.equal(r.status, 201, show(r));
      const host = (await landedOn(r.json.id))!;
      landed.push(host);
      t.same(await servedBy(r, host), [host], `create ${i} arrived at ${NAMES[i % 3]}, served by the driver of ${host}`);
      made.push({ id: r.json.id, host });
    }
    t.same(landed, ['B', 'B', 'B', 'A', 'B', 'A']);
    const full = await create(2, { name: 'none' });
    t.equal(full.status, 503, show(full));
    t.same([full.json.error.code, full.json.error.message], ['compute_unavailable', FULL]);
    t.equal(full.json.error.request_id, full.requestId);
    const raw = await fetch(`${s.bases[0]}/v1/machines`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{}' });
    t.equal(raw.status, 503);
    t.equal(raw.headers.get('retry-after'), '30');
    t.equal(raw.headers.get('x-computer-placement'), null, 'the refusal mark never reaches the caller');
    await raw.body?.cancel();
  });

  await t.test('a malformed body is the handler\'s 400 where it arrives', async (t) => {
    const bad = await create(1, { name: 'x', size: 'galactic' });
    t.equal(bad.status, 400, show(bad));
    t.equal(bad.json.error.details[0].field, 'size');
    t.same(await servedBy(bad, 'B'), ['B']);
  });

  await t.test('every machine route works through any process, served by the machine\'s driver', async (t) => {
    for (const m of made) {
      for (let at = 0; at < 3; at++) {
        const got = await s.call(s.bases[at]!, 'GET', `/v1/machines/${m.id}`, { key });
        t.equal(got.status, 200, show(got));
        answers.push(got);
      }
      const stop = await s.call(s.bases[(NAMES.indexOf(m.host as 'A') + 1) % 3]!, 'POST', `/v1/machines/${m.id}/stop`, { key });
      t.equal(stop.status, 200, `${m.id} on ${m.host}: ${show(stop)}`);
      t.same(await servedBy(stop, m.host), [m.host], "stopped by its host's driver (its fake substrate knows it)");
      const start = await s.call(s.bases[(NAMES.indexOf(m.host as 'A') + 2) % 3]!, 'POST', `/v1/machines/${m.id}/start`, { key });
      t.equal(start.status, 200, show(start));
      t.same(await servedBy(start, m.host), [m.host]);
      answers.push(stop, start);
    }
  });

  await t.test('a fork, of the disk as it is or of a snapshot, is placed like a create', async (t) => {
    // Every host is full now: a fork is refused where it arrives, never sent to its parent's host.
    const onB = made.find((m) => m.host === 'B')!;
    const live = await s.call(s.bases[2]!, 'POST', `/v1/machines/${onB.id}/fork`, { key, body: { name: 'live-fork' } });
    t.equal(live.status, 503, show(live));
    t.same([live.json.error.code, live.json.error.message], ['compute_unavailable', FULL], 'placement found no host with room');
    t.same(await servedBy(live, 'C'), ['C'], "refused where it arrived (C), not sent to the parent's host (B)");
    const euOne = made.find((m) => m.host === 'C')!;
    const away = await s.call(s.bases[0]!, 'POST', `/v1/machines/${euOne.id}/fork`, { key, body: { region: 'default' } });
    t.equal(away.status, 503, show(away));
    t.same([away.json.error.code, away.json.error.message], ['compute_unavailable', 'No host in region default has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.']);
    t.same(await servedBy(away, 'A'), ['A'], 'placed in the hinted region, refused where it arrived');
    const snap = await s.call(s.bases[1]!, 'POST', '/v1/snapshots?wait=true', { cookie, body: { machine_id: onB.id, name: 'for-forks' } });
    t.equal(snap.status, 201, show(snap));
    const placed = await s.call(s.bases[0]!, 'POST', `/v1/machines/${onB.id}/fork`, { key, body: { snapshot_id: snap.json.id } });
    t.equal(placed.status, 503, show(placed));
    t.same([placed.json.error.code, placed.json.error.message], ['compute_unavailable', FULL], 'placement found no host with room');
    t.same(await servedBy(placed, 'A'), ['A'], 'placed where it arrived (no host fits), not sent to the parent\'s host');
    // Room for one on A (its last machine stopped): a live fork of B's machine, arriving at C, goes to A's driver.
    // These hosts' fake substrates move no disk between hosts, so A refuses it before recording anything.
    const lastA = made.filter((m) => m.host === 'A').at(-1)!;
    t.equal((await s.call(s.bases[0]!, 'POST', `/v1/machines/${lastA.id}/stop`, { key })).status, 200);
    const count = async () => (await db.q().selectFrom('machines').select('id').where('deleted_at', 'is', null).execute()).length;
    const before = await count();
    const toA = await s.call(s.bases[2]!, 'POST', `/v1/machines/${onB.id}/fork`, { key, body: { name: 'to-a' } });
    t.equal(toA.status, 503, show(toA));
    t.same([toA.json.error.code, toA.json.error.message], ['compute_unavailable', "The machine's disk is on another host and cannot be copied here (disks do not move between these hosts, or the host is still preparing); retry later."]);
    t.same(await servedBy(toA, 'A'), ['A'], "placed on A (B, the parent's host, is full), served by A's driver");
    t.equal(await count(), before, 'nothing recorded');
    // A start of a stopped machine whose host is full, with no other host in its region with room either (B and C are
    // full; docs/cluster.md, "A start on a full host"; start-elsewhere.test.ts moves one when another host has room):
    // 503 naming capacity from the machine's host's driver, nothing moved, the machine still stopped there.
    const filler = await create(1, { name: 'filler' });
    t.equal(filler.status, 201, show(filler));
    t.equal(await landedOn(filler.json.id), 'A', 'the one room left, on A');
    const full = await s.call(s.bases[1]!, 'POST', `/v1/machines/${lastA.id}/start`, { key });
    t.same([full.status, full.json.error.code, full.json.error.message], [503, 'compute_unavailable', FULL], show(full));
    t.same(await servedBy(full, 'A'), ['A'], "answered by the machine's host's driver");
    t.same([(await s.call(s.bases[2]!, 'GET', `/v1/machines/${lastA.id}`, { key })).json.state, await landedOn(lastA.id)], ['stopped', 'A'], 'still stopped, still on A');
    t.equal((await s.call(s.bases[0]!, 'DELETE', `/v1/machines/${filler.json.id}`, { key })).status, 204);
    t.equal((await s.call(s.bases[0]!, 'POST', `/v1/machines/${lastA.id}/start`, { key })).status, 200, 'A full again');
    answers.push(live, away, snap, placed, toA, full);
  });

  await t.test('the first ranked host\'s driver unreachable: the create goes to the next', async (t) => {
    // Free B (stop its machines), then kill -9 its process; its heartbeat pinned an hour ahead so it stays `active`
    // with its dead listener registered, ranked first: the create must pass to A.
    for (const m of made.filter((m) => m.host === 'B')) t.equal((await s.call(s.bases[0]!, 'POST', `/v1/machines/${m.id}/stop`, { key })).status, 200);
    const freeA = made.find((m) => m.host === 'A')!;
    t.equal((await s.call(s.bases[0]!, 'POST', `/v1/machines/${freeA.id}/stop`, { key })).status, 200, 'room for one on A');
    await db.q().updateTable('hosts').set({ heartbeat_at: new Date(Date.now() + 3_600_000).toISOString() }).execute();
    await child('B').kill9();
    const r = await create(0, { name: 'past-b' });
    t.equal(r.status, 201, show(r));
    t.equal(await landedOn(r.json.id), 'A', 'B ranked first (most free memory) but unreachable: A');
    t.same(await servedBy(r, 'A'), ['A']);
  });

  await t.test('no host id in any answer', async (t) => {
    for (const a of answers) t.notMatch(JSON.stringify(a.json), /host_[0-9a-z]/);
  });
});

t.test('postgres, two hosts: a create that lost the race for its host\'s room goes to the next ranked host', async (t) => {
  // B 10 GiB (two small), A 5 GiB (one): three creates at once all rank [B, A] (the inserts are held until all three
  // wait, so each ranked an empty deployment); B's locked re-check admits two and refuses the third, which the
  // arriving process then offers to A. Without the retry the third is a 503.
  const s = await startServed(t, 'postgres', { requests: true, hosts: [{ shape: shape(5) }, { shape: shape(10) }] });
  const tenants = [await s.tenant('developer'), await s.tenant('developer'), await s.tenant('developer')];
  const hold = await holdWrites(s.url!, 'machines');
  const replies = Promise.all(tenants.map((tn, i) => s.call(s.bases[i % 2]!, 'POST', '/v1/machines', { key: tn.key, body: { name: `race-${i}` } })));
  await hold.waiting(3);
  await hold.release();
  const done = await replies;
  t.same(done.map((r) => r.status), [201, 201, 201], JSON.stringify(done.map((r) => r.json)));
  const db = await openStoreDb({ databaseUrl: s.url!, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  const rows = await db.q().selectFrom('machines').innerJoin('hosts', 'hosts.id', 'machines.host_id').select(['hosts.capacity']).execute();
  t.same(rows.map((r) => (JSON.parse(r.capacity) as { memory_bytes: number }).memory_bytes / GIB).sort((a, b) => a - b), [5, 10, 10], 'two on B, one on A');
});

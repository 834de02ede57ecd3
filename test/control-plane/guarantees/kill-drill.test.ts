/**
 * kill -9 under the driver model (issue 24 items 2, 5 and 6; issue 25 item 5): real `serve()` children
 * (helpers/served-child.ts) on one throwaway PostgreSQL cluster (one database per case), each host's substrate a
 * fake whose machines outlive the process in a file in the host's DATA_DIR (helpers/host-file-substrate.ts), as a
 * real host's disks and guests outlive its control plane.
 *
 * One host, two processes on its DATA_DIR: A drives, B forwards to it. A stream of acknowledged writes through both
 * (signup, API key, machine create, rename, delete, events); then creates are held inside A's substrate (their rows
 * recorded `creating`, never finished: FakeSubstrate.hold, never a clock), three sent to A and two to B (forwarded
 * to A), and A gets SIGKILL once all five are inside. B keeps answering what it serves itself, takes the host over,
 * and its reconcile at the takeover settles the five (`error`, `create_interrupted`): they were begun before B drove
 * the host, though after B started (cluster/substrate-job.ts). Every acknowledged write reads back through B, B's
 * calls after the takeover all answer, and A restarted on the DATA_DIR follows and serves the same data. Then the
 * follower is killed with a create in flight through it (held inside B's substrate until it is gone): its caller
 * gets no answer, the driver finishes the create, B keeps serving.
 *
 * Two hosts, one process each: kill -9 of host A's process (the deployment leader) → B leads, marks A down and
 * fails its machines (`machine.failed`, `host_lost`; the time from the kill is measured and printed, the bound is
 * docs/operations.md's), B's machines keep working; A restarted → its machines come back `stopped` once, and start
 * through either process; one already `error` for its own cause (its guest crashed before the loss) stays `error`
 * and starts on the restarted host. host-loss.test.ts and host-loss-drill.test.ts prove the sweep, the fence and the return
 * on services and a bare driver; this is the same through the API of whole processes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { exitFromOutside, readHostMachines } from '../../helpers/host-file-substrate.js';
import { childGroup, type ChildLine, type PgChild } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';
import { callServed as call, tenantVia, type HttpReply } from '../../helpers/served-processes.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../helpers/served-child.ts');
const PASSWORD = 'correct horse battery';
const LOST_HOST_START = "The machine's host is down (host_lost) and its disk is on that host, so it cannot start there or elsewhere. When the host returns, the machine is stopped and can be started. To carry on now, create a new machine; a snapshot of this machine serves only if its layers were copied to a host that is up (by a fork or a template made from it elsewhere).";

const pg = startPostgres();
t.teardown(async () => (await pg).stop());

const ok = (t: Test, r: HttpReply, status: number, what: string): HttpReply => {
  t.equal(r.status, status, what, { answer: r.json });
  return r;
};

/** A fresh DATA_DIR under /tmp, removed when `t` ends. */
function dataDir(t: Test, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `killdrill-${name}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const ready = (l: ChildLine) => l.ready === true;
const lastState = (c: PgChild) => c.lines.filter((l) => typeof l.state === 'string').at(-1)?.state;

/** A tenant signed up during the drill, and what it was acknowledged: its machines by id, [name, state]. */
interface Tenant {
  email: string;
  cookie: string;
  key: string;
  machines: Map<string, [string, string]>;
  deleted: string[];
}

t.test('one host, two processes: kill -9 of the driver mid-create', async (t) => {
  const url = await (await pg).createDatabase('killdrill_one_host');
  const dir = dataDir(t, 'one');
  const start = childGroup(t, { url, dataDir: dir, hostFileSubstrate: true }, CHILD);
  // One after the other: A migrates, takes the host and the deployment's lead before B starts.
  const a = start('a', {});
  t.equal((await a.next(ready)).driving, true, 'A drives the host');
  const b = start('b', {});
  const bReady = await b.next(ready);
  t.equal(bReady.driving, false, 'B, on the same DATA_DIR, follows');
  const [atA, atB] = [String((await a.next(ready, 0)).base), String(bReady.base)];
  t.equal(lastState(a), 'leading');

  const tenants: Tenant[] = [];
  let n = 0;
  /** Through `base`: a tenant, a second key, three machines (the first running), a rename, a delete. */
  async function stream(t: Test, base: string, tag: string): Promise<Tenant> {
    const tn: Tenant = { ...(await tenantVia(base, 'pro', ++n)), machines: new Map(), deleted: [] };
    ok(t, await call(base, 'POST', '/v1/api-keys', { cookie: tn.cookie, body: { name: 'second', scopes: ['machines:read'] } }), 201, 'second key');
    const ids: string[] = [];
    for (const i of [1, 2, 3]) {
      const r = ok(t, await call(base, 'POST', '/v1/machines', { key: tn.key, body: { name: `${tag}-${i}`, start: i === 1 } }), 201, 'create');
      ids.push(r.json.id as string);
      tn.machines.set(r.json.id as string, [`${tag}-${i}`, i === 1 ? 'running' : 'stopped']);
    }
    ok(t, await call(base, 'PATCH', `/v1/machines/${ids[0]}`, { key: tn.key, body: { name: `${tag}-1r` } }), 200, 'rename');
    tn.machines.set(ids[0]!, [`${tag}-1r`, 'running']);
    ok(t, await call(base, 'DELETE', `/v1/machines/${ids[2]}`, { key: tn.key }), 204, 'delete');
    tn.machines.delete(ids[2]!);
    tn.deleted.push(ids[2]!);
    tenants.push(tn);
    return tn;
  }

  /**
   * Everything acknowledged, read through `base`; returns what it read, to compare between processes. `unsettled`:
   * machines left out of the comparison (creates in flight at the kill, before a driver settled them).
   */
  async function readBack(t: Test, base: string, unsettled: ReadonlySet<string> = new Set()): Promise<unknown[]> {
    const seen: unknown[] = [];
    for (const tn of tenants) {
      const list = ok(t, await call(base, 'GET', '/v1/machines?limit=100', { key: tn.key }), 200, 'list');
      const got = (list.json.data as Array<{ id: string; name: string; state: string }>).filter((m) => !unsettled.has(m.id)).map((m) => [m.id, m.name, m.state]).sort();
      t.same(got, [...tn.machines].map(([id, [name, state]]) => [id, name, state]).sort(), `${tn.email}: every acknowledged machine, as last named, in its state`);
      for (const id of tn.deleted) t.equal((await call(base, 'GET', `/v1/machines/${id}`, { key: tn.key })).status, 404, 'the delete holds');
      const keys = ok(t, await call(base, 'GET', '/v1/api-keys', { cookie: tn.cookie }), 200, 'keys');
      t.equal(keys.json.data.length, 2, 'both keys');
      ok(t, await call(base, 'POST', '/v1/auth/login', { body: { email: tn.email, password: PASSWORD } }), 200, 'the signup logs in');
      const renamed = [...tn.machines.keys()][0]!;
      const events = ok(t, await call(base, 'GET', `/v1/machines/${renamed}/events?limit=100`, { key: tn.key }), 200, 'events');
      const types = (events.json.data as Array<{ type: string }>).map((e) => e.type);
      t.same(types, ['machine.updated', 'machine.started', 'machine.created'], 'the renamed machine\'s events, newest first');
      seen.push(got, keys.json.data.length, types);
    }
    return seen;
  }

  const onA = await stream(t, atA, 'a');
  const onB = await stream(t, atB, 'b');

  // In flight at the kill: five creates held inside A's substrate, three sent to A, two to B (forwarded to A).
  a.send({ op: 'hold', call: 'create' });
  await a.next((l) => l.held === 'create');
  const settle = (p: Promise<HttpReply>) => p.then((r) => `answered ${r.status}`, (e: Error) => e.name);
  const inFlight = [
    ...[1, 2, 3].map((i) => settle(call(atA, 'POST', '/v1/machines', { key: onA.key, body: { name: `lost-a-${i}` } }))),
    ...[1, 2].map((i) => settle(call(atB, 'POST', '/v1/machines', { key: onB.key, body: { name: `lost-b-${i}` } }))),
  ];
  const entered: string[] = [];
  for (let i = 0; i < 5; i++) entered.push(String((await a.next((l) => l.substrate === 'create')).id));
  const bLinesAtKill = b.lines.length;
  const killedAt = Date.now();
  await a.kill9();
  t.same((await Promise.all(inFlight)).slice(0, 3), ['TypeError', 'TypeError', 'TypeError'], 'A answered none of its own in-flight creates (fetch failed)');
  t.same((await Promise.all(inFlight)).slice(3), ['answered 503', 'answered 503'], 'B answers its forwarded ones 503 (retryable): the driver went mid-answer');

  // B keeps serving what it serves itself while it takes the host over.
  await readBack(t, atB, new Set(entered));

  const driving = await b.next((l) => l.log === 'host.driving', bLinesAtKill);
  t.comment(`kill -9 of A → B drives the host: ${driving.at - killedAt} ms (epoch ${String(driving.epoch)})`);
  t.equal(driving.epoch, 2, 'B took the host over at the next epoch');
  const reconciled = await b.next((l) => Array.isArray(l.reconciled), bLinesAtKill);
  t.same(
    [...(reconciled.reconciled as string[][])].sort(),
    entered.map((id) => [id, 'creating', 'error']).sort(),
    "B's reconcile at the takeover settled the five creates A began after B started: none stays `creating`",
  );
  const interrupted: Array<[Tenant, string[]]> = [[onA, ['lost-a-1', 'lost-a-2', 'lost-a-3']], [onB, ['lost-b-1', 'lost-b-2']]];
  for (const [tn, names] of interrupted) {
    const list = ok(t, await call(atB, 'GET', '/v1/machines?limit=100', { key: tn.key }), 200, 'list');
    for (const m of list.json.data as Array<{ id: string; name: string; state: string }>) {
      if (!names.includes(m.name)) continue;
      t.equal(m.state, 'error', `${m.name}: settled`);
      const ev = ok(t, await call(atB, 'GET', `/v1/machines/${m.id}/events?limit=100`, { key: tn.key }), 200, 'events');
      t.same((ev.json.data as Array<{ type: string }>).map((e) => e.type), ['machine.failed', 'machine.created'], `${m.name}: created, then failed`);
      t.same(ev.json.data[0].data, { from: 'creating', to: 'error', operation: 'create', code: 'conflict', reason: 'create_interrupted', reconciled: true });
      tn.machines.set(m.id, [m.name, 'error']);
    }
  }
  t.equal(tenants.reduce((s, tn) => s + tn.machines.size, 0), 9, '4 acknowledged machines and 5 interrupted creates');
  await b.next((l) => l.state === 'leading', bLinesAtKill);
  t.pass('B leads the deployment too');

  // Every call on B after the takeover answers, driver's work included: A's machines are on the host's substrate.
  await readBack(t, atB);
  const aStopped = [...onA.machines].find(([, [name]]) => name === 'a-2')![0];
  ok(t, await call(atB, 'POST', `/v1/machines/${aStopped}/start`, { key: onA.key }), 200, "a machine A made starts on B: the host's substrate kept it");
  ok(t, await call(atB, 'POST', `/v1/machines/${aStopped}/stop`, { key: onA.key }), 200, 'and stops');
  const after = ok(t, await call(atB, 'POST', '/v1/machines', { key: onB.key, body: { name: 'after', start: false } }), 201, 'a create on B');
  onB.machines.set(after.json.id as string, ['after', 'stopped']);
  await readBack(t, atB);

  // A restarted on the DATA_DIR follows and serves the same data; its machine routes go to B.
  const a2 = start('a2', {});
  const a2Ready = await a2.next(ready);
  t.equal(a2Ready.driving, false, 'the restarted A follows');
  const atA2 = String(a2Ready.base);
  t.same(await readBack(t, atA2), await readBack(t, atB), 'the restarted A serves the same data');
  const back = ok(t, await call(atA2, 'POST', '/v1/machines', { key: onA.key, body: { name: 'back', start: false } }), 201, 'a create on the restarted A');
  onA.machines.set(back.json.id as string, ['back', 'stopped']);
  ok(t, await call(atA2, 'POST', `/v1/machines/${back.json.id}/start`, { key: onA.key }), 200, 'started through A, by B');
  onA.machines.set(back.json.id as string, ['back', 'running']);
  t.equal(readHostMachines(dir).get(back.json.id as string)?.state, 'running', "on the host's substrate");
  t.equal(tenants.reduce((s, tn) => s + tn.machines.size, 0), 11, 'machines in all');

  // kill -9 of the follower with a create in flight through it (held inside B's substrate until A is gone): the
  // caller's connection fails, the driver finishes the create it began (nothing half-done), and B keeps serving.
  b.send({ op: 'hold', call: 'create' });
  await b.next((l) => l.held === 'create');
  const through = settle(call(atA2, 'POST', '/v1/machines', { key: onA.key, body: { name: 'through-a' } }));
  const throughId = String((await b.next((l) => l.substrate === 'create')).id);
  await a2.kill9();
  t.equal(await through, 'TypeError', 'the caller of the killed follower gets no answer (fetch failed)');
  b.send({ op: 'release', call: 'create' });
  await b.next((l) => l.released === 'create');
  let seen = '';
  while ((seen = (await call(atB, 'GET', `/v1/machines/${throughId}`, { key: onA.key })).json.state as string) === 'creating') await new Promise((r) => setTimeout(r, 100));
  t.equal(seen, 'running', 'the driver finished the create the follower forwarded');
  onA.machines.set(throughId, ['through-a', 'running']);
  await readBack(t, atB);
  ok(t, await call(atB, 'POST', `/v1/machines/${throughId}/stop`, { key: onA.key }), 200, 'B serves it');
  t.equal(readHostMachines(dir).get(throughId)?.starts, 1, 'started once, on the host');
});

t.test('two hosts: kill -9 of one host process, its machines error, the other host works; back, every machine startable', async (t) => {
  const url = await (await pg).createDatabase('killdrill_two_hosts');
  const dirs = { east: dataDir(t, 'east'), west: dataDir(t, 'west') };
  const start = childGroup(t, { url, hostFileSubstrate: true }, CHILD);
  const host = (name: string, region: 'east' | 'west') => start(name, { dataDir: dirs[region], region });
  const a = host('a', 'east');
  const atA = String((await a.next(ready)).base);
  const b = host('b', 'west');
  const atB = String((await b.next(ready)).base);
  t.equal(lastState(a), 'leading', 'A, started first, leads the deployment');
  const tn = await tenantVia(atB, 'pro', 3);
  const key = tn.key;

  // Machines on each host (the region hint places them), each made through the other host's process.
  const made: Record<string, string> = {};
  for (const [name, region, at, run] of [['a1', 'east', atB, true], ['a2', 'east', atB, false], ['a3', 'east', atB, true], ['b1', 'west', atA, true], ['b2', 'west', atA, false]] as const) {
    made[name] = ok(t, await call(at, 'POST', '/v1/machines', { key, body: { name, region, start: run } }), 201, `create ${name}`).json.id as string;
  }
  const state = async (at: string, name: string) => (await call(at, 'GET', `/v1/machines/${made[name]}`, { key })).json.state as string;
  const events = async (at: string, name: string) =>
    (ok(t, await call(at, 'GET', `/v1/machines/${made[name]}/events?limit=100`, { key }), 200, `${name} events`).json.data as Array<{ type: string; data: Record<string, unknown> }>).map((e) => e.type);

  // a3's guest crashes before the loss: A's substrate watch fails it (`error` for a cause of its own, not the host's).
  exitFromOutside(dirs.east, made.a3!, 'crashed');
  while ((await state(atB, 'a3')) !== 'error') await new Promise((r) => setTimeout(r, 100));

  const bLinesAtKill = b.lines.length;
  const killedAt = Date.now();
  await a.kill9();
  // B's machines keep working while A's host is lost.
  ok(t, await call(atB, 'POST', `/v1/machines/${made.b1}/stop`, { key }), 200, 'b1 stops through B');
  ok(t, await call(atB, 'POST', `/v1/machines/${made.b1}/start`, { key }), 200, 'b1 starts through B');
  while ((await state(atB, 'a1')) !== 'error') await new Promise((r) => setTimeout(r, 100));
  t.comment(`kill -9 of host A's process → its machine error (read through B): ${Date.now() - killedAt} ms (docs: within 10 s)`);
  await b.next((l) => l.state === 'leading', bLinesAtKill);
  t.pass('B leads the deployment (it marked A down)');
  const states = (at: string) => Promise.all(['a1', 'a2', 'a3', 'b1', 'b2'].map((name) => state(at, name)));
  t.same(await states(atB), ['error', 'error', 'error', 'running', 'stopped']);
  const failed = (from: string) => ({ from, to: 'error', operation: 'host', code: 'compute_unavailable', reason: 'host_lost' });
  for (const [name, from] of [['a1', 'running'], ['a2', 'stopped']] as const) {
    const ev = ok(t, await call(atB, 'GET', `/v1/machines/${made[name]}/events?limit=100`, { key }), 200, 'events').json.data as Array<{ type: string; data: unknown }>;
    t.same(ev.slice(0, 2).map((e) => [e.type, e.data]), [['machine.failed', failed(from)], ['host.unhealthy', { reason: 'host_lost' }]], `${name}: failed with its host`);
  }
  t.same(await events(atB, 'a3'), ['host.unhealthy', 'machine.failed', 'machine.started', 'machine.created'], 'a3, error already: told, not failed again');
  t.same(await events(atB, 'b1'), ['machine.started', 'machine.stopped', 'machine.started', 'machine.created'], "b1: nothing of A's loss");
  const refused = await call(atB, 'POST', `/v1/machines/${made.a1}/start`, { key });
  t.same([refused.status, refused.json.error?.code, refused.json.error?.message], [409, 'conflict', LOST_HOST_START], 'a start through the API while its host is down: 409 with the cause (was a 503 to retry forever)');

  // A's host comes back: its process restarted on its DATA_DIR drives it again and settles its lost machines once.
  const a2 = host('a2', 'east');
  const a2Ready = await a2.next(ready);
  t.equal(a2Ready.driving, true, 'the restarted A drives its host');
  const atA2 = String(a2Ready.base);
  t.equal((await a2.next((l) => l.log === 'host.driving', 0)).epoch, 3, 'at epoch 3 (1: first takeover, 2: marked down)');
  t.match(await a2.next((l) => l.log === 'host.returned', 0), { stopped: 2, still_error: 0 }, 'both lost machines stopped: their disks are on the host');
  for (const at of [atA2, atB]) {
    t.same(await states(at), ['stopped', 'stopped', 'error', 'running', 'stopped'], 'honest through either process: a3 stays error, its own cause');
  }
  t.same(await events(atA2, 'a1'), ['machine.stopped', 'machine.failed', 'host.unhealthy', 'machine.started', 'machine.created'], 'a1: failed once, stopped once');
  // Every machine startable, through either process.
  ok(t, await call(atB, 'POST', `/v1/machines/${made.a1}/start`, { key }), 200, 'a1 (error until its host returned) starts through B');
  ok(t, await call(atA2, 'POST', `/v1/machines/${made.a2}/start`, { key }), 200, 'a2 starts through A');
  ok(t, await call(atB, 'POST', `/v1/machines/${made.a3}/start`, { key }), 200, 'a3, error, starts on the restarted host through B');
  ok(t, await call(atA2, 'POST', `/v1/machines/${made.b2}/start`, { key }), 200, 'b2 starts through A');
  ok(t, await call(atA2, 'POST', `/v1/machines/${made.b1}/stop`, { key }), 200, 'b1 stops through A');
  // What each host's substrate was asked: each machine on its own host only, started once per acknowledged start.
  const onHost = (dir: string) => [...readHostMachines(dir).values()].map((m) => [m.id, m.state, m.starts]).sort();
  t.same(onHost(dirs.east), [[made.a1, 'running', 2], [made.a2, 'running', 1], [made.a3, 'running', 2]].sort(), "host A's substrate: a1 and a3 started at create and now, a2 now");
  t.same(onHost(dirs.west), [[made.b1, 'stopped', 2], [made.b2, 'running', 1]].sort(), "host B's substrate: b1 started at create and during the loss, b2 now");
});

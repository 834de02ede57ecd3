/**
 * Two control-plane processes on one PostgreSQL, kill -9 of either (issue 24 items 2 and 6): real `serve()` children
 * (helpers/served-child.ts, the fake substrate), each on its OWN DATA_DIR (two hosts' worth: nothing here depends on
 * the forward between processes), one throwaway cluster. Each round:
 * - a stream of acknowledged writes split over both processes at once (signup, API key create, machine create,
 *   rename, delete, the events read back);
 * - requests in flight on the victim while it is killed: its machine creates and the survivor's are held at their
 *   insert (helpers/pg-hold.ts, PostgreSQL's own locks, never a clock) until all five wait, then the victim gets
 *   SIGKILL and the hold is released — the victim's die unacknowledged and leave nothing, the survivor's succeed;
 * - every write acknowledged before the kill, by either process, is there and readable through the survivor (counts
 *   pinned), and the survivor goes on writing;
 * - the victim led the deployment: the survivor takes the lead and runs the deployment's jobs (its session sweep);
 * - the victim restarted on its DATA_DIR serves the same data, and takes writes.
 * Round one kills A (the first leader), round two kills B (the leader since round one).
 *
 * Machines are created stopped (`start: false`): each process has its own fake substrate and, until machines span
 * hosts, the deployment leader's substrate watch checks every running machine on its own substrate.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { holdWrites } from '../../helpers/pg-hold.js';
import { childGroup, type PgChild } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';
import { callServed as call, tenantVia, type HttpReply } from '../../helpers/served-processes.js';

// Up to ten process starts per test; on a loaded host each takes seconds.
t.setTimeout(900_000);

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../helpers/served-child.ts');
const PASSWORD = 'correct horse battery';

interface Proc {
  name: 'a' | 'b';
  child: PgChild;
  base: string;
  /** Machines recorded before it started, whose disks its substrate (a fake, in memory) never held. */
  stale: string[];
}

/** A tenant signed up during the drill, and what it was acknowledged. */
interface Tenant {
  email: string;
  cookie: string;
  key: string;
  /** The machines it should have, by id: their names (after renames). */
  live: Map<string, string>;
  deleted: string[];
}

const ok = (t: Test, r: HttpReply, status: number, what: string): HttpReply => {
  t.equal(r.status, status, `${what}: ${JSON.stringify(r.json)}`);
  return r;
};

/** Two DATA_DIRs on one throwaway cluster, and a starter of served processes on them (the session sweep every 200 ms). */
async function deployment(t: Test) {
  const pg = await startPostgres();
  t.teardown(pg.stop);
  const dirs = { a: fs.mkdtempSync(path.join(os.tmpdir(), 'kill-drill-a-')), b: fs.mkdtempSync(path.join(os.tmpdir(), 'kill-drill-b-')) };
  t.teardown(() => Object.values(dirs).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
  // The session sweep (a deployment job) every 200 ms, so the test sees which process runs it.
  const start = childGroup(t, { url: pg.url, sweepMs: 200 }, CHILD);
  /** Starts process `name` on its DATA_DIR (`faultPoint`: it SIGKILLs itself there, control-plane/src/fault-points.ts). */
  const up = async (name: 'a' | 'b', stale: string[], faultPoint?: string): Promise<Proc> => {
    const child = start(name, { dataDir: dirs[name] }, faultPoint ? { COMPUTER_FAULT_POINT: faultPoint } : {});
    return { name, child, base: String((await child.next((l) => l.ready === true)).base), stale };
  };
  return { url: pg.url, up };
}

const stateOf = (p: Proc) => p.child.lines.filter((l) => typeof l.state === 'string').at(-1)?.state;

t.test('kill -9 of either of two control planes on one PostgreSQL', { timeout: 600_000 }, async (t) => {
  const pg = await deployment(t);
  const tenants: Tenant[] = [];
  /** Machines a leader's reconcile moved to `error` (honestly: its substrate has no disk for them). */
  const errored = new Set<string>();
  const liveIds = () => tenants.flatMap((tn) => [...tn.live.keys()]);
  const up = (name: 'a' | 'b') => pg.up(name, liveIds());
  // One after the other: A migrates the database and takes the deployment lock before B starts.
  const procs = { a: await up('a'), b: await up('b') };
  t.equal(stateOf(procs.a), 'leading', 'A, started first, leads');
  t.equal(stateOf(procs.b), 'following');

  let n = 0;

  /** The acknowledged stream on one process: a tenant, a second key, three machines, a rename, a delete. */
  async function stream(t: Test, p: Proc, tag: string): Promise<Tenant> {
    const made = await tenantVia(p.base, 'pro', ++n);
    const tn: Tenant = { ...made, live: new Map(), deleted: [] };
    ok(t, await call(p.base, 'POST', '/v1/api-keys', { cookie: tn.cookie, body: { name: 'second', scopes: ['machines:read'] } }), 201, 'second key');
    const ids: string[] = [];
    for (const i of [1, 2, 3]) {
      const r = ok(t, await call(p.base, 'POST', '/v1/machines', { key: tn.key, body: { name: `${tag}-${i}`, start: false } }), 201, 'create');
      ids.push(r.json.id as string);
      tn.live.set(r.json.id as string, `${tag}-${i}`);
    }
    ok(t, await call(p.base, 'PATCH', `/v1/machines/${ids[0]}`, { key: tn.key, body: { name: `${tag}-1r` } }), 200, 'rename');
    tn.live.set(ids[0]!, `${tag}-1r`);
    ok(t, await call(p.base, 'DELETE', `/v1/machines/${ids[2]}`, { key: tn.key }), 204, 'delete');
    tn.live.delete(ids[2]!);
    tn.deleted.push(ids[2]!);
    tenants.push(tn);
    return tn;
  }

  /** Everything acknowledged so far, read through `p`. Returns what it read (to compare between processes). */
  async function readBack(t: Test, p: Proc): Promise<unknown[]> {
    const seen: unknown[] = [];
    for (const tn of tenants) {
      const list = ok(t, await call(p.base, 'GET', '/v1/machines?limit=100', { key: tn.key }), 200, 'list');
      const names = (list.json.data as Array<{ id: string; name: string; state: string }>).map((m) => [m.id, m.name, m.state]).sort();
      const want = [...tn.live].map(([id, name]) => [id, name, errored.has(id) ? 'error' : 'stopped']).sort();
      t.same(names, want, `${tn.email}: every acknowledged machine, named as last renamed, stopped as created (or error: reconciled)`);
      for (const id of tn.deleted) t.equal((await call(p.base, 'GET', `/v1/machines/${id}`, { key: tn.key })).status, 404, 'the delete holds');
      const keys = ok(t, await call(p.base, 'GET', '/v1/api-keys', { cookie: tn.cookie }), 200, 'keys');
      t.equal(keys.json.data.length, 2, 'both keys');
      ok(t, await call(p.base, 'POST', '/v1/auth/login', { body: { email: tn.email, password: PASSWORD } }), 200, 'the signup logs in');
      const renamed = [...tn.live.keys()][0]!;
      const events = ok(t, await call(p.base, 'GET', `/v1/machines/${renamed}/events?limit=100`, { key: tn.key }), 200, 'events');
      const types = (events.json.data as Array<{ type: string }>).map((e) => e.type);
      t.same(types, [...(errored.has(renamed) ? ['machine.failed'] : []), 'machine.updated', 'machine.created'], 'its events, newest first');
      seen.push(names, keys.json.data.length, types);
    }
    return seen;
  }

  async function round(t: Test, victim: Proc, survivor: Proc, tag: string): Promise<Proc> {
    t.equal(stateOf(victim), 'leading', 'the victim leads the deployment');
    const [onVictim, onSurvivor] = await Promise.all([stream(t, victim, `${tag}-${victim.name}`), stream(t, survivor, `${tag}-${survivor.name}`)]);

    // In flight on both at the kill: 3 creates on the victim, 2 on the survivor, all held at their insert.
    const hold = await holdWrites(pg.url, 'machines');
    const lost = [1, 2, 3].map((i) =>
      call(victim.base, 'POST', '/v1/machines', { key: onVictim.key, body: { name: `${tag}-lost-${i}`, start: false } }).then(
        (r) => `answered ${r.status}`,
        (e: Error) => e.name,
      ),
    );
    const kept = [1, 2].map((i) => call(survivor.base, 'POST', '/v1/machines', { key: onSurvivor.key, body: { name: `${tag}-kept-${i}`, start: false } }));
    await hold.waiting(5);
    await victim.child.kill9();
    await hold.release();
    t.same(await Promise.all(lost), ['TypeError', 'TypeError', 'TypeError'], 'the victim answered none of its in-flight creates (fetch failed)');
    for (const r of await Promise.all(kept)) {
      ok(t, r, 201, 'the survivor’s in-flight create');
      onSurvivor.live.set(r.json.id as string, r.json.name as string);
    }

    // The survivor keeps taking writes.
    const more = ok(t, await call(survivor.base, 'POST', '/v1/machines', { key: onVictim.key, body: { name: `${tag}-after`, start: false } }), 201, 'create after the kill');
    onVictim.live.set(more.json.id as string, `${tag}-after`);

    const leading = survivor.child.lines.indexOf(await survivor.child.next((l) => l.state === 'leading', 0));
    await survivor.child.next((l) => l.sweep === true, leading + 1);
    t.pass('the survivor leads, and the deployment’s session sweep runs in it');
    if (survivor.stale.length) {
      // A restarted survivor leads with a fresh fake substrate: its reconcile finds no disk for the machines made
      // before it started and moves them to `error` (create_interrupted), as it would on a host that lost them.
      await survivor.child.next((l) => l.say === `reconciled ${survivor.stale.length} machine(s) left mid-operation`, 0);
      t.equal(survivor.stale.length, 7, 'the 7 machines of round one');
      survivor.stale.forEach((id) => errored.add(id));
    }

    const read = await readBack(t, survivor);
    t.equal(tenants.reduce((s, tn) => s + tn.live.size, 0), tag === 'r1' ? 7 : 15, 'machines acknowledged in all');

    const back = await up(victim.name);
    t.equal(stateOf(back), 'following', 'the restarted victim follows');
    t.same(await readBack(t, back), read, 'the restarted victim serves the same data');
    const fresh = ok(t, await call(back.base, 'POST', '/v1/machines', { key: onSurvivor.key, body: { name: `${tag}-back`, start: false } }), 201, 'a create on the restarted victim');
    onSurvivor.live.set(fresh.json.id as string, `${tag}-back`);
    return back;
  }

  await t.test('A killed: B keeps serving and leads, A comes back', async (t) => {
    procs.a = await round(t, procs.a, procs.b, 'r1');
  });
  await t.test('B killed: A keeps serving and leads, B comes back', async (t) => {
    procs.b = await round(t, procs.b, procs.a, 'r2');
  });
  t.equal(tenants.length, 4);
  t.same((await readBack(t, procs.a)).length, 12);
});

t.test('kill -9 at the fault points of a process while the other serves', { timeout: 600_000 }, async (t) => {
  const pg = await deployment(t);
  const a1 = await pg.up('a', [], 'machines.create.before_substrate');
  const b = await pg.up('b', []);
  t.equal(stateOf(a1), 'leading');
  const tn = await tenantVia(b.base, 'pro', 1);
  const names = async () =>
    (ok(t, await call(b.base, 'GET', '/v1/machines?limit=100', { key: tn.key }), 200, 'list').json.data as Array<{ id: string; name: string; state: string }>)
      .map((m) => [m.name, m.state]).sort();

  // Killed at create's point: its decision (a stopped row) is committed, never answered; B serves and leads.
  const died = await call(a1.base, 'POST', '/v1/machines', { key: tn.key, body: { name: 'interrupted', start: false } }).then((r) => `answered ${r.status}`, (e: Error) => e.name);
  t.equal(died, 'TypeError', 'A died before answering');
  await a1.child.kill9();
  ok(t, await call(b.base, 'POST', '/v1/machines', { key: tn.key, body: { name: 'on-b', start: false } }), 201, 'B creates');
  await b.child.next((l) => l.state === 'leading', 0);
  t.same(await names(), [['interrupted', 'stopped'], ['on-b', 'stopped']], 'B reads the decided row and its own');

  // A again, killed at delete's point: the decision (deleting) is committed, never answered.
  const a2 = await pg.up('a', [], 'machines.delete.before_destroy');
  const doomed = ok(t, await call(a2.base, 'POST', '/v1/machines', { key: tn.key, body: { name: 'doomed', start: false } }), 201, 'A creates');
  const gone = await call(a2.base, 'DELETE', `/v1/machines/${doomed.json.id}`, { key: tn.key }).then((r) => `answered ${r.status}`, (e: Error) => e.name);
  t.equal(gone, 'TypeError', 'A died before answering');
  await a2.child.kill9();
  ok(t, await call(b.base, 'POST', '/v1/machines', { key: tn.key, body: { name: 'on-b-2', start: false } }), 201, 'B creates');
  t.same(await names(), [['doomed', 'deleting'], ['interrupted', 'stopped'], ['on-b', 'stopped'], ['on-b-2', 'stopped']]);
  // B, leading since before both kills, does not settle them: its reconcile ran when it took the lead, for
  // operations begun before B started (docs/operations.md, "kill -9 of either process"). A leader started after the
  // kills does: A again (no fault point), then B killed.
  const a3 = await pg.up('a', []);
  await b.child.kill9();
  await a3.child.next((l) => l.state === 'leading', 0);
  await a3.child.next((l) => l.say === 'reconciled 4 machine(s) left mid-operation', 0);
  const after = await call(a3.base, 'GET', '/v1/machines?limit=100', { key: tn.key });
  t.same((after.json.data as Array<{ name: string; state: string }>).map((m) => [m.name, m.state]).sort(),
    [['interrupted', 'error'], ['on-b', 'error'], ['on-b-2', 'error']],
    'the interrupted create is error (and so are B\'s machines: A\'s fake substrate never held their disks); the delete is done');
  t.equal((await call(a3.base, 'GET', `/v1/machines/${doomed.json.id}`, { key: tn.key })).status, 404);
  const interrupted = (after.json.data as Array<{ id: string; name: string }>).find((m) => m.name === 'interrupted')!;
  const ev = ok(t, await call(a3.base, 'GET', `/v1/machines/${interrupted.id}/events?limit=100`, { key: tn.key }), 200, 'events');
  t.match(ev.json.data[0], { type: 'machine.failed', data: { from: 'stopped', to: 'error', operation: 'create', reason: 'create_interrupted', reconciled: true } });
});

/**
 * Machine events across processes (control-plane/src/cluster/notify.ts, issue 24 item 3), with real processes on
 * one real PostgreSQL: what process A records reaches process B's listener in seq order; events recorded while B's
 * connection is down are read back from the table when it reconnects; two writers at once are still seen in
 * order, none skipped; a new process resumes from a cursor.
 */
import pg from 'pg';
import t from 'tap';
import { openPostgres } from '../../../control-plane/src/store/engine/postgres.js';
import { childGroup, type PgChild } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);

t.test('events recorded by one process reach another in order, across a reconnect, two writers and a restart', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const start = childGroup(t, { url: server.url });
  const engine = await openPostgres(server.url, { max: 1 });
  await engine.db.insertInto('organizations').values({ id: 'org_1', name: 'o', personal: 0, created_at: 'x' }).execute();
  await engine.db.insertInto('machines').values({
    id: 'mch_1', org_id: 'org_1', name: 'box', size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'tok',
    created_by_kind: 'user', created_by_id: 'usr_1', created_at: 'x', updated_at: 'x', state_changed_at: 'x', deleted_at: null,
  }).execute();
  await engine.close();

  const publish = async (p: PgChild, list: string[]) => {
    const from = p.lines.length;
    p.send({ op: 'publish', org: 'org_1', machine: 'mch_1', ids: list });
    await p.next((l) => l.done === list.length, from);
    return p.lines.slice(from).filter((l) => typeof l.published === 'number');
  };
  const received = async (f: PgChild, lastId: string, from: number) => {
    await f.next((l) => l.id === lastId, from);
    return f.lines.slice(from).filter((l) => typeof l.event === 'number');
  };

  const a = start('a', { mode: 'publish' });
  const b = start('b', { mode: 'follow', from: 0, retryMs: 100, holdReconnects: true });
  await Promise.all([a.next((l) => l.ready === true), b.next((l) => l.connected === true)]);

  // Live: A's commits reach B in order.
  let bFrom = b.lines.length;
  const pub1 = await publish(a, ids('e', 5));
  const got1 = await received(b, 'e5', bFrom);
  t.same(got1.map((l) => l.id), ids('e', 5));
  t.same(got1.map((l) => l.event), pub1.map((l) => l.published), 'with the seqs A recorded');
  t.comment(`live event across processes: ${got1[4]!.at - pub1[4]!.at} ms from A's commit line to B's receipt line`);

  // B's connection is cut; events recorded while it is away are read back from the table once it is back.
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  bFrom = b.lines.length;
  const cut = await admin.query("SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'computer-events'");
  t.same(cut.rows, [{ ok: true }], 'one listening session');
  await b.next((l) => l.disconnected === true, bFrom);
  await b.next((l) => l.waiting === true, bFrom);
  const pub2 = await publish(a, ids('m', 3));
  t.notOk(b.lines.slice(bFrom).some((l) => typeof l.event === 'number'), 'nothing reaches B while it is away');
  b.send({ op: 'reconnect' });
  const got2 = await received(b, 'm3', bFrom);
  t.same(got2.map((l) => l.id), ids('m', 3), 'the missed events, once, in order');
  t.same(got2.map((l) => l.event), pub2.map((l) => l.published));

  // Two writers at once: B sees every event, in seq order, none twice.
  const c = start('c', { mode: 'publish' });
  await c.next((l) => l.ready === true);
  bFrom = b.lines.length;
  const [pa, pc] = await Promise.all([publish(a, ids('a', 15)), publish(c, ids('c', 15))]);
  const all = [...pa, ...pc].map((l) => Number(l.published)).sort((x, y) => x - y);
  while (b.lines.slice(bFrom).filter((l) => typeof l.event === 'number').length < all.length) await b.next(() => true);
  const got3 = b.lines.slice(bFrom).filter((l) => typeof l.event === 'number').map((l) => Number(l.event));
  t.same(got3, all, 'thirty events from two writers, strictly in seq order');

  // B dies; a new process resumes from B's cursor: what was recorded meanwhile, then live again.
  const cursor = got3[got3.length - 1]!;
  await b.kill9();
  const pub4 = await publish(a, ids('r', 2));
  const b2 = start('b2', { mode: 'follow', from: cursor, retryMs: 100 });
  const got4 = await received(b2, 'r2', 0);
  t.same(got4.map((l) => l.id), ['r1', 'r2'], 'resumed from the cursor: only what came after it');
  t.same(got4.map((l) => l.event), pub4.map((l) => l.published));
  const b2From = b2.lines.length;
  await publish(a, ['live1']);
  t.same((await received(b2, 'live1', b2From)).map((l) => l.id), ['live1'], 'and live after that');
  await admin.end();
});

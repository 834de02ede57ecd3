/**
 * The input lease's fence strictly increasing across processes (issue 24 item 2), on both engines: on PostgreSQL two
 * real control-plane processes on one database, the concurrent acquire/renew/release/steal calls split between them;
 * on SQLite one process. Every grant is a compare-and-set on the fence that was read (store/repos/machines.ts
 * `leases.put`), so two grants can never hand out the same fence; a release that loses its compare-and-set reads the
 * lease again (services/leases.ts) instead of recording a release that did not happen.
 *
 * On PostgreSQL the overlap is forced (helpers/pg-hold.ts), never timed: the lease's writes are held until every
 * racing transaction has read it and waits to write.
 */
import t from 'tap';
import { holdRow } from '../../helpers/pg-hold.js';
import { race, startServed, type Engine, type HttpReply, type Served } from '../../helpers/served-processes.js';

const statuses = (rs: HttpReply[]) => rs.map((r) => r.status).sort((a, b) => a - b);

for (const engine of ['postgres', 'sqlite'] as Engine[]) {
  t.test(`${engine}: the input lease under concurrent calls`, async (t) => {
    const s = await startServed(t, engine);
    // The developer plan: 10 concurrent sessions.
    const { key } = await s.tenant('developer');
    const created = await s.call(s.base(0), 'POST', '/v1/machines', { key, body: { name: 'leased' } });
    t.equal(created.status, 201, JSON.stringify(created.json));
    const id = created.json.id as string;
    t.equal(created.json.state, 'running', 'the fake substrate starts it at once');
    const lease = `/v1/machines/${id}/input-lease`;
    const sessions: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await s.call(s.base(i), 'POST', '/v1/sessions', { key, body: { machine_id: id, type: 'agent' } });
      t.equal(r.status, 201, JSON.stringify(r.json));
      sessions.push(r.json.id as string);
    }
    const acquire = (i: number, body: Record<string, unknown> = {}) => s.call(s.base(i), 'POST', lease, { key, body: { session_id: sessions[i], ...body } });
    const winner = (rs: HttpReply[]) => rs.find((r) => r.status === 200)!.json as { session_id: string; fence: number; renewed: boolean };

    let holder = '';
    await t.test('8 concurrent first acquires: one grant, fence 1', async (t) => {
      const rs = await race(s, 'input_leases', 8, (_b, i) => acquire(i));
      t.same(statuses(rs), [200, 409, 409, 409, 409, 409, 409, 409], JSON.stringify(rs.map((r) => r.json)));
      for (const r of rs.filter((r) => r.status === 409)) t.equal(r.json.error.code, 'conflict');
      t.match(winner(rs), { fence: 1, renewed: false });
      holder = winner(rs).session_id;
    });

    await t.test('7 concurrent forced steals: each grant a fence of its own, strictly increasing', async (t) => {
      const others = sessions.map((_, i) => i).filter((i) => sessions[i] !== holder);
      const rs = await race(s, 'input_leases', 7, (_b, n) => acquire(others[n]!, { force: true }));
      const granted = rs.filter((r) => r.status === 200).map((r) => r.json.fence as number).sort((a, b) => a - b);
      // PostgreSQL: all 7 read fence 1, one compare-and-set wins, six are told to retry. SQLite: one writer, so
      // the 7 take it from each other in turn.
      t.same(granted, engine === 'postgres' ? [2] : [2, 3, 4, 5, 6, 7, 8], JSON.stringify(rs.map((r) => r.json)));
      for (const r of rs.filter((r) => r.status !== 200)) t.match(r.json.error, { code: 'conflict', message: /changed while it was being acquired/ });
      holder = rs.find((r) => r.status === 200 && r.json.fence === granted.at(-1))!.json.session_id as string;
      const now = await s.call(s.base(1), 'GET', lease, { key });
      t.match(now.json, { held: true, session_id: holder, fence: granted.at(-1) }, 'one holder: the last grant');
    });

    await t.test('a stale fence is refused on either process', async (t) => {
      const now = (await s.call(s.base(0), 'GET', lease, { key })).json as { fence: number };
      for (let i = 0; i < 2; i++) {
        const stale = await s.call(s.base(i), 'POST', `/v1/machines/${id}/keyboard/type`, { key, body: { text: 'x' }, headers: { 'x-session-id': holder, 'x-lease-fence': '1' } });
        t.equal(stale.status, 409);
        t.equal(stale.json.error.message, `Stale fence 1: the current input lease fence is ${now.fence}.`);
        const loser = sessions.find((x) => x !== holder)!;
        const lost = await s.call(s.base(i), 'POST', `/v1/machines/${id}/keyboard/type`, { key, body: { text: 'x' }, headers: { 'x-session-id': loser, 'x-lease-fence': '1' } });
        t.equal(lost.status, 409);
        t.match(lost.json.error.message, `held by session ${holder}`);
      }
    });

    await t.test("a steal and the holder's release at once, the steal first: the release is refused, recorded once", async (t) => {
      const before = (await s.call(s.base(0), 'GET', lease, { key })).json as { fence: number };
      const thief = sessions.find((x) => x !== holder)!;
      const hold = s.url ? await holdRow(s.url, 'input_leases', 'machine_id', id) : null;
      const steal = acquire(sessions.indexOf(thief), { force: true });
      // SQLite (one process, one writer): the steal first is simply the steal answered first.
      await (hold ? hold.waiting(1) : steal);
      const release = s.call(s.base(1), 'DELETE', `${lease}?session_id=${holder}`, { key });
      await hold?.waiting(2);
      await hold?.release();
      const [st, rel] = await Promise.all([steal, release]);
      t.equal(st.status, 200, JSON.stringify(st.json));
      t.match(st.json, { session_id: thief, fence: before.fence + 1, renewed: false });
      t.equal(rel.status, 409, JSON.stringify(rel.json));
      t.equal(rel.json.error.message, `The input lease is held by session ${thief}, not ${holder}.`);
      const released = (await events(s, key, id)).filter((e) => e.type === 'session.control_released' && e.data.session_id === holder && e.data.fence === before.fence);
      t.same(released.map((e) => e.data.reason), ['revoked'], "the holder's end recorded once, as the steal");
      holder = thief;
    });

    await t.test('renew, release and steal at once: the event log has one holder at a time', async (t) => {
      const thieves = sessions.filter((x) => x !== holder).slice(0, 4);
      const h = sessions.indexOf(holder);
      const calls: Array<(b: string) => Promise<HttpReply>> = [
        () => acquire(h, { ttl_seconds: 120 }),
        (b) => s.call(b, 'DELETE', `${lease}?session_id=${holder}`, { key }),
        ...thieves.map((x) => () => acquire(sessions.indexOf(x), { force: true })),
      ];
      const rs = await race(s, 'input_leases', calls.length, (b, i) => calls[i]!(b));
      for (const r of rs) t.ok(r.status === 200 || r.status === 204 || r.status === 409, JSON.stringify(r.json));
      // Replay the log: every grant takes the next fence, every release names the holder of the moment.
      let cur: { session_id: string; fence: number } | null = null;
      let fence = 0;
      for (const e of await events(s, key, id)) {
        if (e.type === 'session.control_acquired') {
          t.equal(e.data.fence, ++fence, `acquired fence ${e.data.fence}`);
          t.equal(cur === null || e.data.forced, true, 'a grant while held is a takeover');
          cur = { session_id: e.data.session_id, fence: e.data.fence };
        } else if (e.type === 'session.control_released') {
          t.same({ session_id: e.data.session_id, fence: e.data.fence }, cur, `released ${e.data.session_id} fence ${e.data.fence} was the holder`);
          cur = null;
        }
      }
      const now = (await s.call(s.base(1), 'GET', lease, { key })).json as { held: boolean; session_id: string | null; fence: number };
      t.equal(now.fence, fence, 'the lease shows the last fence handed out');
      t.equal(now.session_id, now.held ? cur!.session_id : null, 'and the holder the log says');
    });
  });
}

/** The machine's lease events, oldest first. */
async function events(s: Served, key: string, id: string): Promise<Array<{ type: string; data: any }>> {
  const r = await s.call(s.base(0), 'GET', `/v1/machines/${id}/events?limit=200`, { key });
  return (r.json.data as Array<{ type: string; data: any }>).filter((e) => e.type.startsWith('session.control_')).reverse();
}

/**
 * The machine, session, input lease, event, volume-restart, preview and secret repositories on both engines
 * (issue 24 item 1): every method, literal rows, compare-and-sets with one winner among racing transactions, the
 * lease's insert-or-ignore, event sequence numbers, and the move hooks awaited in order inside the transaction.
 */
import t from 'tap';
import { ENGINES, machineRow, race, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);
const T1 = '2026-01-01T00:00:01.000Z';
const T2 = '2026-01-01T00:00:02.000Z';

for (const engine of ENGINES) {
  t.test(`machines on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const m = store.machines;
    await seedOrg(store);
    const m1 = machineRow('mch_1');
    const m2 = machineRow('mch_2', { state: 'stopped', created_at: T1, size: 'large' });
    const m3 = machineRow('mch_3', { state: 'creating', size: 'standard' });
    for (const row of [m2, m3, m1]) await m.insert(row);
    t.strictSame(await m.inOrg('org_a', 'mch_1'), m1);
    t.equal(await m.inOrg('org_b', 'mch_1'), undefined);
    t.strictSame(await m.byId('mch_2'), m2);
    t.ok(await m.nameTaken('org_a', 'mch_1'));
    t.notOk(await m.nameTaken('org_a', 'mch_1', 'mch_1'), 'its own name');
    t.notOk(await m.nameTaken('org_a', 'other'));
    t.strictSame((await m.page('org_a', { created_at: '', id: '' }, 2, null)).map((r) => r.id), ['mch_1', 'mch_3']);
    t.strictSame((await m.page('org_a', { created_at: T0, id: 'mch_3' }, 2, null)).map((r) => r.id), ['mch_2']);
    t.strictSame((await m.page('org_a', { created_at: '', id: '' }, 5, 'creating')).map((r) => r.id), ['mch_3']);
    t.strictSame((await m.inStates(['running', 'stopped'])).map((r) => r.id), ['mch_1', 'mch_2']);
    t.strictSame(await m.inStates([]), []);
    t.equal(await m.countLive('org_a'), 3);
    t.equal(await m.countRunning('org_a'), 1);
    t.equal(await m.countCompute('org_a'), 2);
    t.strictSame(await m.countsOf('org_a'), { live: 3, compute: 2 }, 'both quota counts in one statement');
    t.strictSame(await m.countsOf('org_b'), { live: 0, compute: 0 }, 'an organization with none');
    t.strictSame(await m.computeBySize(), [{ size: 'small', n: 1 }, { size: 'standard', n: 1 }]);
    t.strictSame(await m.countByState(), [{ state: 'creating', n: 1 }, { state: 'running', n: 1 }, { state: 'stopped', n: 1 }]);

    const seen: string[] = [];
    m.onMove(async (row, from, to, at) => {
      await store.volumeRestarts.add(`${row.id}:${to ?? 'gone'}`);
      seen.push(`first ${row.id} ${row.org_id} ${row.size} ${from}->${to ?? 'gone'} ${at}`);
    });
    m.onMove(async (row) => {
      seen.push(`second ${row.id} restarts=${(await store.volumeRestarts.all()).length}`);
    });
    t.strictSame(await race(store, 4, async () => (await m.casState('mch_1', 'running', 'stopping', T2)) !== null), [false, false, false, true], 'one of four moves wins');
    t.strictSame(seen, [`first mch_1 org_a small running->stopping ${T2}`, 'second mch_1 restarts=1'], 'the hooks ran once, in order, the second after the first');
    t.strictSame(await m.byId('mch_1'), { ...m1, state: 'stopping', state_changed_at: T2, updated_at: T2 });

    await t.rejects(
      store.db.tx(async () => {
        await m.casState('mch_1', 'stopping', 'stopped', T2);
        throw new Error('the caller failed after the move');
      }),
    );
    t.equal((await m.byId('mch_1'))!.state, 'stopping', 'a move rolled back with its transaction');
    t.strictSame((await store.volumeRestarts.all()).map((r) => r.machine_id), ['mch_1:stopping'], "and so did its hooks' writes");
    seen.length = 0;

    t.notOk(await m.markDeleted('mch_2', T2), 'only a deleting machine is marked deleted');
    t.ok(await m.casState('mch_2', 'stopped', 'deleting', T2));
    t.ok(await m.markDeleted('mch_2', '2026-01-01T00:00:03.000Z'));
    t.strictSame(seen, [`first mch_2 org_a large stopped->deleting ${T2}`, 'second mch_2 restarts=2', 'first mch_2 org_a large deleting->gone 2026-01-01T00:00:03.000Z', 'second mch_2 restarts=3']);
    t.equal(await m.byId('mch_2'), undefined, 'gone for the API');
    t.strictSame(await m.anyById('mch_2'), { ...m2, state: 'deleting', state_changed_at: T2, updated_at: '2026-01-01T00:00:03.000Z', deleted_at: '2026-01-01T00:00:03.000Z' });
    t.notOk(await m.nameTaken('org_a', 'mch_2'), 'a deleted machine frees its name');
    // The name check in the insert: a live name taken writes nothing; a deleted machine's name is free; a primary key
    // taken (a warm member's id) is not a name conflict and throws.
    t.equal(await m.insertUnlessNameTaken(machineRow('mch_4', { name: 'mch_1' })), false, 'a live name taken: not inserted');
    t.equal(await m.anyById('mch_4'), undefined, 'nothing written');
    t.equal(await m.insertUnlessNameTaken(machineRow('mch_4', { name: 'mch_2' })), true, "a deleted machine's name: inserted");
    t.strictSame(await m.byId('mch_4'), machineRow('mch_4', { name: 'mch_2' }));
    await t.rejects(m.insertUnlessNameTaken(machineRow('mch_4', { name: 'fresh' })), 'the primary key taken still throws');
    await m.removeRow('mch_4');
    t.equal(await m.countLive('org_a'), 2);

    await m.update('mch_3', { name: 'renamed', metadata: '{"a":"b"}' }, T2);
    t.strictSame(await m.byId('mch_3'), { ...m3, name: 'renamed', metadata: '{"a":"b"}', updated_at: T2 });
    await store.events.insert({ id: 'evt_x', org_id: 'org_a', machine_id: 'mch_3', type: 'machine.created', data: '{}', created_at: T0 });
    await m.removeRow('mch_3');
    t.equal(await m.anyById('mch_3'), undefined);
    t.strictSame(await store.events.after('mch_3', 0, 10), [], 'its events went with it');
  });

  t.test(`sessions, leases, events and volume restarts on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const s = store.sessions;
    await seedOrg(store);
    await store.machines.insert(machineRow('mch_1'));
    await store.machines.insert(machineRow('mch_2'));
    const session = (id: string, machine: string, state: 'active' | 'idle' | 'closed', created: string) => ({
      id, org_id: 'org_a', machine_id: machine, type: 'agent' as const, state, opener_kind: 'user' as const, opener_id: 'usr_a', created_at: created, closed_at: null,
    });
    await s.insert(session('ses_2', 'mch_1', 'idle', T1));
    await s.insert(session('ses_1', 'mch_1', 'active', T1));
    await s.insert(session('ses_3', 'mch_2', 'active', T0));
    t.strictSame(await s.inOrg('org_a', 'ses_1'), { ...session('ses_1', 'mch_1', 'active', T1), last_active_at: null });
    t.strictSame(await s.byId('ses_3'), { ...session('ses_3', 'mch_2', 'active', T0), last_active_at: null });
    t.equal(await s.inOrg('org_b', 'ses_1'), undefined);
    const ids = (rows: Array<{ id: string }>) => rows.map((r) => r.id);
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, { machine_id: null, state: null })), ['ses_3', 'ses_1', 'ses_2']);
    t.strictSame(ids(await s.page('org_a', { created_at: T0, id: 'ses_3' }, 1, { machine_id: null, state: null })), ['ses_1']);
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, { machine_id: 'mch_1', state: null })), ['ses_1', 'ses_2']);
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, { machine_id: 'mch_1', state: 'active' })), ['ses_1']);
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, { machine_id: null, state: 'active' })), ['ses_3', 'ses_1']);
    t.equal(await s.countOpen('org_a'), 3);
    t.strictSame(ids(await s.openOnMachine('mch_1')), ['ses_1', 'ses_2']);
    t.strictSame(await race(store, 3, () => s.setState('ses_2', 'idle', 'active')), [false, false, true], 'one of three state moves wins');
    t.strictSame(await s.touch('ses_3', T2), { changes: 1 });
    await s.touchActive('2026-01-01T00:00:05.000Z');
    t.strictSame(await s.byId('ses_3'), { ...session('ses_3', 'mch_2', 'active', T0), last_active_at: '2026-01-01T00:00:05.000Z' }, 'every active session touched');

    const lease = store.leases;
    t.equal(await lease.get('mch_1'), null);
    const first = await race(store, 3, (i) => lease.put('mch_1', null, { session_id: `ses_${i + 1}`, fence: 1, expires_at: 5000 }, T0));
    t.strictSame(first, [false, false, true], 'of three takers that read no lease, one inserts it');
    const held = (await lease.get('mch_1'))!;
    t.equal(held.fence, 1);
    t.equal(held.expires_at, 5000);
    t.strictSame(await s.openWithActivity(4999).then((rows) => rows.map((r) => [r.id, r.last_active, r.leased])), [
      // Whichever of the three racing takers won holds the lease (any of them may).
      ['ses_3', '2026-01-01T00:00:05.000Z', held.session_id === 'ses_3' ? 1 : 0],
      ['ses_1', '2026-01-01T00:00:05.000Z', held.session_id === 'ses_1' ? 1 : 0],
      ['ses_2', '2026-01-01T00:00:05.000Z', held.session_id === 'ses_2' ? 1 : 0],
    ], 'leased is 1 or 0 on both engines');
    t.strictSame((await s.openWithActivity(5000)).map((r) => r.leased), [0, 0, 0], 'an expired lease is not held');
    t.ok(await lease.put('mch_1', held, { session_id: held.session_id, fence: 1, expires_at: 9000 }, T1), 'a renewal keeps the fence (matched on the holder)');
    const takes = await race(store, 3, (i) => lease.put('mch_1', held, { session_id: `ses_${i + 1}`, fence: 2, expires_at: 9000 }, T1));
    t.strictSame(takes, [false, false, true], 'of three takers that read fence 1, one moves it to 2');
    const taken = (await lease.get('mch_1'))!;
    t.equal(taken.fence, 2);
    t.notOk(await lease.put('mch_1', held, { session_id: 'ses_3', fence: 3, expires_at: 9000 }, T1), 'a stale read loses');
    t.notOk(await lease.put('mch_1', { ...taken, session_id: 'ses_9' }, { session_id: 'ses_3', fence: 3, expires_at: 9000 }, T1), 'another holder loses');
    t.ok(await lease.put('mch_1', taken, { session_id: null, fence: 3, expires_at: 0 }, T2), 'a release');
    t.strictSame(await lease.get('mch_1'), { machine_id: 'mch_1', session_id: null, fence: 3, expires_at: 0 });
    t.ok(await lease.put('mch_1', { machine_id: 'mch_1', session_id: null, fence: 3, expires_at: 0 }, { session_id: 'ses_3', fence: 4, expires_at: 7000 }, T2), 'taken after a release: the null holder matched');
    t.notOk(await lease.put('mch_1', null, { session_id: 'ses_1', fence: 1, expires_at: 1 }, T2), 'an insert over an existing lease is ignored');

    t.ok(await s.close('ses_1', T2));
    t.notOk(await s.close('ses_1', T2), 'closed once');
    t.strictSame(await s.byId('ses_1'), { ...session('ses_1', 'mch_1', 'closed', T1), closed_at: T2, last_active_at: '2026-01-01T00:00:05.000Z' });
    t.strictSame(await s.touch('ses_1', T2), { changes: 0 }, 'a closed session is not touched');
    t.equal(await s.countOpen('org_a'), 2);

    const ev = store.events;
    const event = (n: number, machine: string) => ({ id: `evt_${n}`, org_id: 'org_a', machine_id: machine, type: 'machine.updated', data: `{"n":${n}}`, created_at: T0 });
    t.strictSame([await ev.insert(event(1, 'mch_1')), await ev.insert(event(2, 'mch_1')), await ev.insert(event(3, 'mch_2')), await ev.insert(event(4, 'mch_1'))], [1, 2, 3, 4]);
    t.strictSame(await ev.pageDesc('mch_1', null, 2), [{ seq: 4, ...event(4, 'mch_1') }, { seq: 2, ...event(2, 'mch_1') }]);
    t.strictSame((await ev.pageDesc('mch_1', 2, 10)).map((e) => e.seq), [1]);
    t.strictSame((await ev.after('mch_1', 1, 10)).map((e) => e.seq), [2, 4]);
    t.strictSame((await ev.after('mch_1', 0, 1)).map((e) => e.seq), [1]);
    t.equal(await ev.lastSeq('mch_1'), 4);
    t.equal(await ev.lastSeq('mch_9'), 0);
    const racing = await Promise.all([5, 6, 7, 8, 9].map((n) => store.db.tx(() => ev.insert(event(n, 'mch_2')))));
    t.strictSame([...racing].sort((a, b) => a - b), [5, 6, 7, 8, 9], 'concurrent inserts get distinct numbers');
    t.strictSame((await ev.after('mch_2', 0, 10)).map((e) => e.seq), [3, 5, 6, 7, 8, 9], 'read back in order');
    // A drain's own record (it names hosts) is in the log but never in the tenant's reads: the spec's types only.
    t.equal(await ev.insert({ ...event(10, 'mch_2'), type: 'drain.step' }), 10);
    t.strictSame((await ev.after('mch_2', 9, 10)).map((e) => e.seq), [], 'after: not listed');
    t.strictSame((await ev.pageDesc('mch_2', null, 1)).map((e) => e.seq), [9], 'pageDesc: not listed');

    const v = store.volumeRestarts;
    t.notOk(await v.any());
    t.strictSame(await v.add('mch_2'), { changes: 1 });
    t.strictSame(await v.add('mch_2'), { changes: 0 }, 'owed once');
    await v.add('mch_1');
    t.strictSame(await v.stopped('mch_2', T2), { changes: 1 });
    t.ok(await v.any());
    t.strictSame(await v.all(), [{ machine_id: 'mch_1', stopped_at: null }, { machine_id: 'mch_2', stopped_at: T2 }]);
    t.strictSame(await v.forget('mch_1'), { changes: 1 });
    t.strictSame(await v.all(), [{ machine_id: 'mch_2', stopped_at: T2 }]);
  });

  t.test(`previews on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const p = store.previews;
    await seedOrg(store);
    await store.machines.insert(machineRow('mch_1'));
    await store.machines.insert(machineRow('mch_2', { state: 'deleting' }));
    const preview = (id: string, machine: string, port: number, created = T0) => ({
      id, org_id: 'org_a', machine_id: machine, port, name: null, access: 'private' as const, secret_hash: 'sh', access_token_hash: `at_${id}`,
      cookie_hash: null, last_request_at: null, created_at: created, deleted_at: null,
    });
    await p.insert(preview('prv_2', 'mch_1', 8080, T1));
    await p.insert(preview('prv_1', 'mch_1', 3000, T1));
    await p.insert(preview('prv_3', 'mch_2', 3000));
    t.strictSame(await p.live('prv_1'), preview('prv_1', 'mch_1', 3000, T1));
    t.strictSame(await p.inOrg('org_a', 'mch_1', 'prv_2'), preview('prv_2', 'mch_1', 8080, T1));
    t.equal(await p.inOrg('org_a', 'mch_2', 'prv_2'), undefined);
    t.strictSame(await p.onPort('mch_1', 3000), preview('prv_1', 'mch_1', 3000, T1));
    t.strictSame((await p.page('org_a', null, { created_at: '', id: '' }, 10)).map((r) => r.id), ['prv_3', 'prv_1', 'prv_2']);
    t.strictSame((await p.page('org_a', 'mch_1', { created_at: T1, id: 'prv_1' }, 10)).map((r) => r.id), ['prv_2']);
    await store.machines.markDeleted('mch_2', T2);
    t.equal(await p.live('prv_3'), undefined, "a deleted machine's previews are not live");
    t.strictSame((await p.page('org_a', null, { created_at: '', id: '' }, 10)).map((r) => r.id), ['prv_1', 'prv_2']);
    t.strictSame(await race(store, 3, () => p.useAccessToken('prv_1', 'at_prv_1', 'ck')), [false, false, true], 'the one-shot link trades once');
    t.notOk(await p.useAccessToken('prv_2', 'at_prv_1', 'ck'), "another preview's token");
    await p.touch('prv_1', T2);
    t.strictSame(await p.live('prv_1'), { ...preview('prv_1', 'mch_1', 3000, T1), access_token_hash: null, cookie_hash: 'ck', last_request_at: T2 });
    t.strictSame(await race(store, 3, () => p.markDeleted('prv_1', T2)), [false, false, true], 'unpublished once');
    t.equal(await p.live('prv_1'), undefined);
    t.equal(await p.onPort('mch_1', 3000), undefined);
  });

  t.test(`secrets on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const s = store.secrets;
    await seedOrg(store);
    await store.machines.insert(machineRow('mch_1'));
    await store.machines.insert(machineRow('mch_2'));
    const secret = (id: string, machine: string, name: string, bytes: number, created = T0) => ({
      id, org_id: 'org_a', machine_id: machine, name, version: 1, key_id: 'k1', sealed: Buffer.from([0, 1, 2, 255]), value_bytes: bytes,
      created_at: created, updated_at: created, delivered_at: null, delivered_version: null, delivered_boot: null,
    });
    await s.insert(secret('sec_3', 'mch_1', 'b', 10));
    await s.insert(secret('sec_1', 'mch_1', 'a', 20, T1));
    await s.insert(secret('sec_2', 'mch_1', 'A_B', 30));
    await s.insert(secret('sec_4', 'mch_2', 'a', 5));
    t.strictSame(await s.get('mch_1', 'a'), secret('sec_1', 'mch_1', 'a', 20, T1), 'the sealed bytes come back as a Buffer');
    t.strictSame((await s.forMachine('mch_1')).map((r) => r.name), ['A_B', 'a', 'b'], 'names in byte order');
    t.equal(await s.countAll(), 4);
    t.strictSame(await s.usage('mch_1', 'b'), { n: 2, bytes: 50 });
    t.strictSame(await s.usage('mch_9', 'b'), { n: 0, bytes: 0 });
    t.strictSame((await s.pageOrg('org_a', { created_at: '', id: '' }, 3)).map((r) => r.id), ['sec_2', 'sec_3', 'sec_4']);
    t.strictSame((await s.pageOrg('org_a', { created_at: T0, id: 'sec_4' }, 3)).map((r) => r.id), ['sec_1']);
    const next = { version: 2, key_id: 'k1', sealed: Buffer.from('new'), value_bytes: 3, updated_at: T2 };
    t.strictSame(await race(store, 3, () => s.replace('sec_1', 1, next)), [false, false, true], 'one replacement of the version read');
    t.strictSame(await race(store, 3, () => s.reseal('sec_1', 2, 'k1', { key_id: 'k2', sealed: Buffer.from('resealed') })), [false, false, true]);
    t.notOk(await s.markDelivered('mch_1', 'a', 1, 'boot1', T2), 'an old version is not recorded as delivered');
    t.ok(await s.markDelivered('mch_1', 'a', 2, 'boot1', T2));
    t.strictSame(await s.get('mch_1', 'a'), {
      ...secret('sec_1', 'mch_1', 'a', 3, T1), version: 2, key_id: 'k2', sealed: Buffer.from('resealed'), updated_at: T2,
      delivered_at: T2, delivered_version: 2, delivered_boot: 'boot1',
    });
    t.strictSame([...(await s.keyIds())].sort(), ['k1', 'k2']);
    t.strictSame((await s.all()).map((r) => r.id), ['sec_1', 'sec_2', 'sec_3', 'sec_4']);
    t.ok(await s.remove('mch_1', 'b'));
    t.notOk(await s.remove('mch_1', 'b'));
    t.equal(await s.removeAllForMachine('mch_1'), 2);
    t.strictSame((await s.all()).map((r) => r.id), ['sec_4']);
  });
}

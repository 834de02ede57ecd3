/**
 * The snapshot, template and usage repositories on both engines (issue 24 item 1), and the guarantees that must hold
 * across processes on PostgreSQL (item 2): the organization lock that makes a quota count exact under racing
 * transactions, a removal's hooks running once when removals race, and pages in byte order whatever the database's
 * collation.
 */
import { sql } from 'kysely';
import pg from 'pg';
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { createStore, type Store } from '../../../control-plane/src/store/store.js';
import { socketUrl } from '../../helpers/postgres.js';
import { ENGINES, machineRow, race, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);
const T1 = '2026-01-01T00:00:01.000Z';
const T2 = '2026-01-01T00:00:02.000Z';

const snapshot = (id: string, machine: string, state: 'pending' | 'ready' | 'error' | 'deleting', created: string, layer: string | null = null, bytes: number | null = null) => ({
  id, org_id: 'org_a', machine_id: machine, name: id, state, origin: 'manual' as const, layer_id: layer, size_bytes: bytes, created_at: created, completed_at: null,
  host_id: 'host_1',
});
const template = (id: string, state: 'building' | 'ready' | 'error', created: string, layer: string | null = null, bytes: number | null = null) => ({
  id, org_id: 'org_a', name: id, state, source: 'image' as const, size: 'small' as const, snapshot_id: null, machine_id: null, layer_id: layer,
  size_bytes: bytes, created_at: created, completed_at: null, host_id: null,
});

for (const engine of ENGINES) {
  t.test(`snapshots and templates on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const s = store.snapshots;
    await seedOrg(store);
    t.equal(await s.layerBytes(), 0, 'no layers');
    await s.insert(snapshot('snp_1', 'mch_1', 'ready', T0, 'lyr_1', 100));
    await s.insert(snapshot('snp_4', 'mch_1', 'ready', T0, 'lyr_1', 150));
    await s.insert(snapshot('snp_2', 'mch_1', 'pending', T1, 'lyr_3', 999));
    await s.insert(snapshot('snp_3', 'mch_2', 'error', T0));
    t.strictSame(await s.inOrg('org_a', 'snp_1'), snapshot('snp_1', 'mch_1', 'ready', T0, 'lyr_1', 100));
    t.equal(await s.inOrg('org_b', 'snp_1'), undefined);
    t.strictSame(await s.byId('snp_3'), snapshot('snp_3', 'mch_2', 'error', T0));
    const ids = (rows: Array<{ id: string }>) => rows.map((r) => r.id);
    const all = { machine_id: null, origin: null };
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, all)), ['snp_1', 'snp_3', 'snp_4', 'snp_2']);
    t.strictSame(ids(await s.page('org_a', { created_at: T0, id: 'snp_3' }, 1, all)), ['snp_4']);
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, { machine_id: 'mch_2', origin: null })), ['snp_3']);
    t.strictSame(ids(await s.page('org_a', { created_at: '', id: '' }, 10, { machine_id: null, origin: 'stop' })), []);
    t.strictSame(ids(await s.chain('mch_1')), ['snp_2', 'snp_4', 'snp_1'], 'newest first');
    t.equal(await s.countForMachine('mch_1'), 3);
    t.equal(await s.countForMachine('mch_2'), 0, 'an errored capture does not count');
    t.equal(await s.maxPerMachine('org_a'), 3);
    t.equal(await s.maxPerMachine('org_b'), 0);
    t.strictSame(ids(await s.inStates(['pending', 'error'])), ['snp_3', 'snp_2']);
    t.strictSame(await s.inStates([]), []);

    const store2 = store.templates;
    await store2.insert(template('tpl_1', 'ready', T1, 'lyr_1', 120));
    await store2.insert(template('tpl_2', 'ready', T0, 'lyr_2', 50));
    await store2.insert(template('tpl_3', 'building', T0));
    t.equal(await s.layerBytes(), 200, 'the largest size per distinct layer of ready snapshots and templates: 150 + 50');

    t.strictSame(await race(store, 3, () => s.settleReady('snp_2', 'lyr_9', 7, T2)), [false, false, true], 'settled once');
    t.notOk(await s.settleError('snp_2', T2), 'no longer pending');
    t.strictSame(await s.byId('snp_2'), { ...snapshot('snp_2', 'mch_1', 'ready', T1, 'lyr_9', 7), completed_at: T2 });
    await s.insert(snapshot('snp_5', 'mch_2', 'pending', T2));
    t.ok(await s.settleError('snp_5', T2));
    t.strictSame(await s.byId('snp_5'), { ...snapshot('snp_5', 'mch_2', 'error', T2), completed_at: T2 });

    const removed: string[] = [];
    s.onRemove(async (kind, id) => {
      await store.usage.setCursor(id, kind, T2);
      removed.push(`first ${kind} ${id}`);
    });
    s.onRemove(async (kind, id) => {
      removed.push(`second ${kind} ${id} cursor=${await store.usage.cursor(id)}`);
    });
    t.notOk(await s.remove('snp_1'), 'only a deleting snapshot is removed');
    t.strictSame(removed, []);
    t.strictSame(await race(store, 4, () => s.casState('snp_1', 'ready', 'deleting')), [false, false, false, true], 'one of four moves wins');
    t.strictSame(await race(store, 3, () => s.remove('snp_1')), [false, false, true], 'removed once');
    t.strictSame(removed, ['first snapshot snp_1', `second snapshot snp_1 cursor=${T2}`], 'its hooks ran once, in order, before the row went');
    t.equal(await s.byId('snp_1'), undefined);

    const tp = store.templates;
    t.strictSame(await tp.inOrg('org_a', 'tpl_1'), template('tpl_1', 'ready', T1, 'lyr_1', 120));
    t.strictSame(await tp.byId('tpl_2'), template('tpl_2', 'ready', T0, 'lyr_2', 50));
    t.strictSame(ids(await tp.all()), ['tpl_2', 'tpl_3', 'tpl_1']);
    t.strictSame(ids(await tp.page('org_a', { created_at: T0, id: 'tpl_2' }, 1)), ['tpl_3']);
    t.equal(await tp.count('org_a'), 3);
    t.strictSame(ids(await tp.inStates(['building'])), ['tpl_3']);
    t.strictSame(await tp.inStates([]), []);
    t.strictSame(await race(store, 3, () => tp.settleReady('tpl_3', { snapshot_id: 'snp_2', layer_id: 'lyr_9', size_bytes: 7 }, T2)), [false, false, true]);
    t.strictSame(await tp.byId('tpl_3'), { ...template('tpl_3', 'ready', T0, 'lyr_9', 7), snapshot_id: 'snp_2', completed_at: T2 });
    t.notOk(await tp.settleError('tpl_3', T2));
    const th: string[] = [];
    tp.onRemove(async (kind, id) => void th.push(`${kind} ${id}`));
    t.strictSame(await race(store, 3, () => tp.remove('tpl_3')), [false, false, true]);
    t.strictSame(th, ['template tpl_3']);
    t.notOk(await tp.remove('tpl_3'));
  });

  t.test(`usage on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const u = store.usage;
    const rec = { org_id: 'org_a', source_id: 'mch_1', machine_id: 'mch_1', template_id: null, meter: 'compute_small_seconds' as const, size: 'small' as const };
    const H0 = '2026-01-01T00:00:00.000Z';
    const H1 = '2026-01-01T01:00:00.000Z';
    const D2 = '2026-01-02T00:00:00.000Z';
    await u.add({ ...rec, hour: H0, quantity: 9007199254740993n }, T1);
    await u.add({ ...rec, hour: H0, quantity: 7n }, T2);
    await u.add({ ...rec, hour: H1, quantity: 5n }, T2);
    await u.add({ ...rec, source_id: 'snp_1', machine_id: 'mch_1', meter: 'cold_storage_byte_seconds', size: null, hour: D2, quantity: 11n }, T2);
    const page = await u.page('org_a', { start: H0, end: '2026-01-03T00:00:00.000Z', meter: null }, { hour: '', id: '' }, 10);
    t.strictSame(page.map((r) => [r.hour, r.meter, r.size, r.quantity, r.updated_at]), [
      [H0, 'compute_small_seconds', 'small', '9007199254741000', T2],
      [H1, 'compute_small_seconds', 'small', '5', T2],
      [D2, 'cold_storage_byte_seconds', '', '11', T2],
    ], 'grown in place, exact past 2^53, read as decimal text');
    t.strictSame((await u.page('org_a', { start: H0, end: D2, meter: null }, { hour: H0, id: page[0]!.id }, 10)).map((r) => r.hour), [H1], 'after the cursor, before the end');
    t.strictSame((await u.page('org_a', { start: H0, end: '2026-01-03T00:00:00.000Z', meter: 'cold_storage_byte_seconds' }, { hour: '', id: '' }, 10)).map((r) => r.quantity), ['11']);
    t.strictSame(await u.daily('org_a', H0, '2026-01-03T00:00:00.000Z'), [
      { meter: 'compute_small_seconds', day: '2026-01-01', q: '9007199254741005' },
      { meter: 'cold_storage_byte_seconds', day: '2026-01-02', q: '11' },
    ]);
    t.strictSame(await u.hourly('org_a', H0, D2, null), [
      { meter: 'compute_small_seconds', hour: H0, q: '9007199254741000' },
      { meter: 'compute_small_seconds', hour: H1, q: '5' },
    ]);
    t.strictSame(await u.hourly('org_a', H0, '2026-01-03T00:00:00.000Z', 'cold_storage_byte_seconds'), [{ meter: 'cold_storage_byte_seconds', hour: D2, q: '11' }]);

    t.equal(await u.cursor('mch_1'), null);
    await u.setCursor('mch_1', 'machine', T1);
    await u.setCursor('mch_1', 'machine', T2);
    await u.setCursor('snp_gone', 'snapshot', T0);
    await u.setCursor('tpl_gone', 'template', '2026-01-05T00:00:00.000Z');
    t.equal(await u.cursor('mch_1'), T2);
    await u.resumeAll('2026-01-03T00:00:00.000Z');
    t.strictSame([await u.cursor('mch_1'), await u.cursor('tpl_gone')], ['2026-01-03T00:00:00.000Z', '2026-01-05T00:00:00.000Z'], 'only moved forward');
    await seedOrg(store);
    await store.snapshots.insert(snapshot('snp_1', 'mch_1', 'ready', T0, 'lyr_1', 100));
    await store.snapshots.insert(snapshot('snp_2', 'mch_1', 'deleting', T1, 'lyr_1', 30));
    await store.snapshots.insert(snapshot('snp_3', 'mch_1', 'pending', T1));
    await store.templates.insert({ ...template('tpl_1', 'ready', T0, 'lyr_2', 40), completed_at: T2 });
    await u.setCursor('snp_1', 'snapshot', T0);
    t.strictSame(await u.orphanCursors(), [{ source_id: 'snp_gone' }, { source_id: 'tpl_gone' }]);
    t.strictSame(await u.dropCursor('snp_gone'), { changes: 1 });
    t.strictSame(await u.orphanCursors(), [{ source_id: 'tpl_gone' }]);
    const cold = [
      { kind: 'snapshot', id: 'snp_1', org_id: 'org_a', machine_id: 'mch_1', size_bytes: 100, since: T0 },
      { kind: 'snapshot', id: 'snp_2', org_id: 'org_a', machine_id: 'mch_1', size_bytes: 30, since: T1 },
      { kind: 'template', id: 'tpl_1', org_id: 'org_a', machine_id: null, size_bytes: 40, since: T2 },
    ];
    t.strictSame(await u.coldSubjects(), cold);
    t.strictSame(await u.coldSubject('template', 'tpl_1'), cold[2]);
    t.equal(await u.coldSubject('snapshot', 'snp_3'), undefined, 'a pending capture holds nothing yet');
    t.equal(await u.coldSubject('snapshot', 'tpl_1'), undefined);

    t.equal(await u.finalSummary('org_a', T0), null);
    await u.insertFinal('org_a', T0, '{"v":1}', T1);
    await u.insertFinal('org_a', T0, '{"v":2}', T2);
    t.equal(await u.finalSummary('org_a', T0), '{"v":1}', 'a closed period is written once');
  });

  t.test(`a quota count under the organization lock is exact on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    await seedOrg(store);
    // Eight creates at once on an allowance of four: each locks the organization, counts, and inserts if allowed.
    const creates = await race(store, 8, async (i) => {
      await store.identity.lockOrg('org_a');
      if ((await store.machines.countLive('org_a')) >= 4) return false;
      await store.machines.insert(machineRow(`mch_${i}`));
      return true;
    });
    t.strictSame(creates, [false, false, false, false, true, true, true, true], 'exactly four');
    t.equal(await store.machines.countLive('org_a'), 4);
  });

  t.test(`pages and lists in byte order on ${engine}, whatever the database's collation`, async (t) => {
    let store: Store;
    if (engine === 'postgres') {
      // A database whose default collation is ICU's en-US (linguistic: punctuation first, case folded), as a cluster
      // initialised under a common locale would have; the rig's own cluster is C.
      const cluster = await rig.postgres();
      const admin = new pg.Client({ connectionString: socketUrl(cluster.dir, 'computer') });
      await admin.connect();
      await admin.query(`CREATE DATABASE linguistic TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`);
      await admin.end();
      const db = await openStoreDb({ databaseUrl: socketUrl(cluster.dir, 'linguistic'), dataDir: '/nonexistent' });
      t.teardown(() => db.close());
      store = createStore(db);
      const plain = await sql<{ id: string }>`SELECT id FROM (VALUES ('mch_B'), ('mch__'), ('mch_a')) AS v(id) ORDER BY id`.execute(db.q());
      t.strictSame(plain.rows.map((r) => r.id), ['mch__', 'mch_a', 'mch_B'], "the database's own order is not bytes");
    } else {
      store = await rig.open(t, engine);
    }
    await seedOrg(store);
    for (const id of ['mch_a', 'mch_B', 'mch__']) await store.machines.insert(machineRow(id));
    const seen: string[] = [];
    let after = { created_at: '', id: '' };
    for (let i = 0; i < 4; i++) {
      const rows = await store.machines.page('org_a', after, 1, null);
      if (!rows.length) break;
      seen.push(rows[0]!.id);
      after = { created_at: rows[0]!.created_at, id: rows[0]!.id };
    }
    t.strictSame(seen, ['mch_B', 'mch__', 'mch_a'], 'one row a page, following the cursor: each once, in byte order');
    for (const name of ['b', 'a', '_z', 'A_B']) {
      await store.secrets.insert({
        id: `sec_${name}`, org_id: 'org_a', machine_id: 'mch_a', name, version: 1, key_id: 'k', sealed: Buffer.from('x'), value_bytes: 1,
        created_at: T0, updated_at: T0, delivered_at: null, delivered_version: null, delivered_boot: null,
      });
    }
    t.strictSame((await store.secrets.forMachine('mch_a')).map((r) => r.name), ['A_B', '_z', 'a', 'b']);
  });
}

for (const engine of ENGINES) {
  t.test(`a meter cursor read and moved in one claim on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const u = store.usage;
    const T3 = '2026-01-01T00:00:03.000Z';
    t.strictSame(await u.claimCursor('mch_1', 'machine', T1), { prev: null, moved: true }, 'none yet: inserted at the instant');
    t.equal(await u.cursor('mch_1'), T1);
    t.strictSame(await u.claimCursor('mch_1', 'machine', T2), { prev: T1, moved: true }, 'before the instant: advanced, from where it stood');
    t.strictSame(await u.claimCursor('mch_1', 'machine', T2), { prev: T2, moved: false }, 'at the instant: left');
    t.strictSame(await u.claimCursor('mch_1', 'machine', T1), { prev: T2, moved: false }, 'past the instant: never moved back');
    t.equal(await u.cursor('mch_1'), T2);
    // Racing transactions (on PostgreSQL each on its own connection, overlapping): each interval claimed once.
    t.strictSame(await race(store, 4, async () => (await u.claimCursor('mch_1', 'machine', T3)).moved), [false, false, false, true], 'one of four advances wins');
    t.strictSame(await race(store, 4, async () => (await u.claimCursor('mch_2', 'machine', T3)).moved), [false, false, false, true], 'one of four first inserts wins');
    t.strictSame([await u.cursor('mch_1'), await u.cursor('mch_2')], [T3, T3]);
  });
}

t.test('on postgres a claim that read the cursor before a concurrent advance committed claims nothing (no interval twice)', async (t) => {
  const store = await rig.open(t, 'postgres');
  const u = store.usage;
  const [T3, T4] = ['2026-01-01T00:00:03.000Z', '2026-01-01T00:00:04.000Z'];
  await u.setCursor('mch_1', 'machine', T2);
  // A moves T2 → T3 and holds its transaction open; B (T2 → T4) starts meanwhile, its read sees T2, and its upsert waits
  // on A's row lock (seen in pg_stat_activity); A commits. B must not advance from T3 as if it had read T3.
  let commitA!: () => void;
  const held = new Promise<void>((r) => (commitA = r));
  let claimedA!: (c: { prev: string | null; moved: boolean }) => void;
  const a = new Promise<{ prev: string | null; moved: boolean }>((r) => (claimedA = r));
  const txA = store.db.tx(async () => {
    claimedA(await u.claimCursor('mch_1', 'machine', T3));
    await held;
  });
  t.strictSame(await a, { prev: T2, moved: true });
  const b = store.db.tx(() => u.claimCursor('mch_1', 'machine', T4));
  while ((await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(store.db.q())).rows[0]!.n < 1) {
    await new Promise((r) => setImmediate(r));
  }
  commitA();
  await txA;
  t.strictSame(await b, { prev: T2, moved: false }, 'lost: [T2, T3] is A\'s; the caller reads again and claims [T3, T4]');
  t.equal(await u.cursor('mch_1'), T3);
});

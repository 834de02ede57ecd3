/**
 * Placement's store half (issue 25 item 2) on a real, throwaway PostgreSQL: `placeFor` ranks registered hosts from
 * one read of what is placed on each (spread, cordoned never, unknown region 400, full 503 with Retry-After), and
 * the admission's re-check on a host (`roomOnHost`, its row locked FOR UPDATE) never overfills it when admissions of
 * different organizations race: the race is made certain with helpers/pg-hold.ts (every transaction has read before
 * any writes unless the host's row lock serializes them).
 */
import t from 'tap';
import { AppError } from '../../../shared/errors.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { hostsRepo, type HostRegistration } from '../../../control-plane/src/store/repos/hosts.js';
import { createStore, type Store } from '../../../control-plane/src/store/store.js';
import { placeFor, roomOnHost, type HostAdmission } from '../../../control-plane/src/services/placement.js';
import { holdWrites } from '../../helpers/pg-hold.js';
import { startPostgres } from '../../helpers/postgres.js';

const T0 = '2026-01-01T00:00:00.000Z';
const GIB = 1024 * 1024 * 1024;
/** 10 GiB of memory: two small machines (2 × 4096 ≤ 9216 MiB), not three. */
const CAPACITY = { cores: 2, memory_bytes: 10 * GIB, disk_bytes: 100 * GIB, machines: { small: 2, standard: 1, large: 0 } };
const reg = (id: string, region = 'default'): HostRegistration => ({ id, region, capacity: CAPACITY, internalUrl: null });
const A = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';
const C = 'host_cccccccccccccccccccccccc';
const NEW_SMALL: HostAdmission = { kind: 'new', size: 'small', start: true, region: null };
const now = { now: new Date(T0) };

let n = 0;
/** One admission as admission.ts makes it: the host's row locked and the fit re-checked, then the row recorded. */
async function admit(store: Store, hostId: string, a: HostAdmission = NEW_SMALL): Promise<string> {
  const id = `mch_${String(++n).padStart(24, '0')}`;
  await store.db.tx(async () => {
    if (!(await roomOnHost(store, hostId, a, now))) throw new Error('not registered');
    await store.db.q().insertInto('machines').values({
      id, org_id: `org_${n % 4}`, name: id, size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'tok',
      created_by_kind: 'user', created_by_id: 'usr_1', created_at: T0, updated_at: T0, state_changed_at: T0, deleted_at: null, host_id: hostId,
    }).execute();
  });
  return id;
}

const onHosts = async (store: Store) =>
  Object.fromEntries((await store.db.q().selectFrom('machines').select((eb) => ['host_id', eb.fn.countAll<number>().as('n')]).groupBy('host_id').execute()).map((r) => [r.host_id, Number(r.n)]));

async function refusal(p: Promise<unknown>): Promise<unknown> {
  const e: unknown = await p.then(() => null, (x: unknown) => x);
  return e instanceof AppError ? { code: e.code, status: e.status, message: e.message, headers: e.headers } : e;
}

const FULL = {
  code: 'compute_unavailable', status: 503, headers: { 'retry-after': '30' },
  message: 'No host has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.',
};

t.test('postgres: placeFor and the locked re-check', async (t) => {
  const pg = await startPostgres();
  t.teardown(pg.stop);
  const url = await pg.createDatabase('placement');
  const db = await openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  const store = createStore(db);
  const hosts = hostsRepo(db);
  for (let i = 0; i < 4; i++) await db.q().insertInto('organizations').values({ id: `org_${i}`, name: `o${i}`, personal: 0, created_at: T0 }).execute();

  t.same(await placeFor(store, { size: 'small', region: null }, now), { kind: 'anywhere' }, 'no host registered: any process');
  t.equal(await roomOnHost(store, A, NEW_SMALL, now), false, 'an unregistered host admits as a host-less deployment');

  await hosts.takeOver(reg(A));
  await hosts.takeOver(reg(B));
  await hosts.takeOver(reg(C, 'eu'));

  await t.test('spread: each create to the host with the most free memory', async (t) => {
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const p = await placeFor(store, { size: 'small', region: null }, now);
      if (p.kind !== 'hosts') throw new Error('unplaced');
      order.push(p.ranked[0]!);
      await admit(store, p.ranked[0]!);
    }
    t.same(order, [A, B, C], 'ties broken by fewest machines, then id: every host gets one');
    t.same(await onHosts(store), { [A]: 1, [B]: 1, [C]: 1 });
    t.same(await placeFor(store, { size: 'small', region: 'eu' }, now), { kind: 'hosts', ranked: [C] }, 'the hint keeps to its region');
  });

  await t.test('unknown region: 400; a region hint at the host is re-checked too', async (t) => {
    t.same(await refusal(placeFor(store, { size: 'small', region: 'mars' }, now)), {
      code: 'invalid_request', status: 400, headers: {},
      message: 'No host serves region mars; name a region the deployment has, or omit region to place the machine anywhere.',
    });
    t.same(await refusal(admit(store, A, { ...NEW_SMALL, region: 'eu' })), { ...FULL, message: FULL.message.replace('No host has', 'No host in region eu has') });
  });

  await t.test('cordoned hosts get nothing; a start of a machine already there still may', async (t) => {
    t.same(await hosts.operate(C, 'cordon'), { ok: true, from: 'active', to: 'cordoned', changed: true });
    t.same(await placeFor(store, { size: 'small', region: null }, now), { kind: 'hosts', ranked: [A, B] });
    t.same(await refusal(admit(store, C)), FULL, 'a create reaching the cordoned host itself is refused');
    t.equal(await store.db.tx(() => roomOnHost(store, C, { kind: 'start', size: 'small' }, now)), true);
    await admit(store, A);
    await admit(store, B);
    t.same(await refusal(placeFor(store, { size: 'small', region: null }, now)), FULL, 'full (C has room but is cordoned): 503');
    t.same(await onHosts(store), { [A]: 2, [B]: 2, [C]: 1 });
  });

  await t.test('four admissions racing for the last room on one host: exactly one', async (t) => {
    t.same(await hosts.operate(C, 'uncordon'), { ok: true, from: 'cordoned', to: 'active', changed: true });
    const hold = await holdWrites(url, 'machines');
    const racing = Promise.allSettled([0, 1, 2, 3].map(() => admit(store, C)));
    await hold.waiting(4);
    await hold.release();
    const settled = await racing;
    t.equal(settled.filter((s) => s.status === 'fulfilled').length, 1, JSON.stringify(settled.map((s) => (s.status === 'rejected' ? String(s.reason) : 'ok'))));
    for (const s of settled) if (s.status === 'rejected') t.same(await refusal(Promise.reject(s.reason)), FULL);
    t.same(await onHosts(store), { [A]: 2, [B]: 2, [C]: 2 }, 'no host holds more than two small machines');
  });
});

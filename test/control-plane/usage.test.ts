/**
 * Usage through /v1 on a controllable clock (real SQLite, fake substrate): a machine driven through
 * running / stopped / deleted intervals with every meter checked to the second and byte; records, series
 * (week boundary) and the usage summary of a trial and of a paid plan with overage against hand-computed
 * lines; a closed period's final summary; the trial's compute limit (402 and machines stopped with disks
 * captured); a billing event from the operator CLI acted on by the server, not the CLI; and a real child
 * process SIGKILLed while flushing loses nothing it committed and counts nothing twice.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../control-plane/src/cli.js';
import { CATALOG, type CatalogVersion } from '../../control-plane/src/domain/catalog.js';
import { DB_FILENAME, openDb } from '../../control-plane/src/store/db.js';
import type { Meter } from '../../shared/schemas/usage.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig, until, type MachinesRig } from '../helpers/machines-rig.js';
import { TEST_ENGINE } from '../helpers/rig-db.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ALL = ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write'];
const T0 = Date.parse('2026-11-22T06:00:00.000Z');
const STANDARD_DISK = 26843545600; // 25 GiB

async function setup(t: Test, catalog?: readonly CatalogVersion[]) {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate, services: catalog ? { catalog } : {} });
  rig.clock.real = false;
  rig.clock.t = T0;
  t.teardown(async () => {
    fake.close();
    await rig.close();
  });
  return { rig, fake };
}

async function running(rig: MachinesRig, key: string, body: object) {
  const r = await rig.call('POST', '/v1/machines', { key, body });
  if (r.status !== 201) throw new Error(`create ${r.status} ${r.text}`);
  await until('running', 100, async () => ((await rig.call('GET', `/v1/machines/${r.json.id}`, { key })).json.state === 'running' ? true : null));
  return r.json.id as string;
}

async function settle(rig: MachinesRig, key: string, id: string, state: string) {
  await until(state, 100, async () => {
    const r = await rig.call('GET', `/v1/machines/${id}`, { key });
    return (state === 'deleted' ? r.status === 404 : r.json?.state === state) ? true : null;
  });
}

const set = (rig: MachinesRig, iso: string) => (rig.clock.t = Date.parse(iso));

t.test('a machine through running, stopped and deleted: every meter to the second and byte', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const id = await running(rig, a.key, { size: 'standard' });

  set(rig, '2026-11-22T07:15:00.000Z');
  rig.services.metering.egress.add(id, 1234);
  await rig.services.metering.flush();
  set(rig, '2026-11-22T07:30:10.500Z');
  t.equal((await rig.call('POST', `/v1/machines/${id}/stop`, { key: a.key })).status < 300, true);
  await settle(rig, a.key, id, 'stopped');
  set(rig, '2026-11-22T09:00:00.000Z');
  t.equal((await rig.call('DELETE', `/v1/machines/${id}`, { key: a.key })).status < 300, true);
  await settle(rig, a.key, id, 'deleted');
  set(rig, '2026-11-22T09:30:00.000Z');
  await rig.services.metering.flush();

  const all: any[] = [];
  let cursor: string | null = null;
  do {
    const r = await rig.call('GET', `/v1/usage?start=2026-11-22T00:00:00Z&end=2026-11-23T00:00:00Z&limit=2${cursor ? `&cursor=${cursor}` : ''}`, { key: a.key });
    t.equal(r.status, 200);
    all.push(...r.json.data);
    cursor = r.json.next_cursor;
  } while (cursor);
  const seen = all.map((r) => [r.start, r.meter, r.size, r.quantity, r.machine_id]).sort();
  t.same(seen, [
    // running [06:00:00, 07:30:10.500): 3600 + 1810 s
    ['2026-11-22T06:00:00.000Z', 'compute_standard_seconds', 'standard', '3600', id],
    // live [06:00, 09:00): 25 GiB × 3600 s each hour, stopped hours included
    ['2026-11-22T06:00:00.000Z', 'hot_storage_byte_seconds', 'standard', '96636764160000', id],
    ['2026-11-22T07:00:00.000Z', 'compute_standard_seconds', 'standard', '1810', id],
    ['2026-11-22T07:00:00.000Z', 'egress_bytes', null, '1234', id],
    ['2026-11-22T07:00:00.000Z', 'hot_storage_byte_seconds', 'standard', '96636764160000', id],
    ['2026-11-22T08:00:00.000Z', 'hot_storage_byte_seconds', 'standard', '96636764160000', id],
  ].sort());
  t.equal(all[0].end, '2026-11-22T07:00:00.000Z', 'a record covers one hour');

  const only = await rig.call('GET', '/v1/usage?start=2026-11-22T07:00:00Z&end=2026-11-22T08:00:00Z&meter=compute_standard_seconds', { key: a.key });
  t.same(only.json.data.map((r: any) => r.quantity), ['1810']);

  // Series: a week is hourly; a week and a millisecond is daily (the day sums the hours).
  const week = await rig.call('GET', '/v1/usage/series?start=2026-11-20T00:00:00Z&end=2026-11-27T00:00:00Z', { key: a.key });
  t.equal(week.json.bucket_width, 'hour');
  t.same(week.json.data.find((s: any) => s.meter === 'compute_standard_seconds').buckets, [
    { start: '2026-11-22T06:00:00.000Z', quantity: '3600' },
    { start: '2026-11-22T07:00:00.000Z', quantity: '1810' },
  ], 'empty hours are absent');
  const longer = await rig.call('GET', '/v1/usage/series?start=2026-11-20T00:00:00Z&end=2026-11-27T00:00:00.001Z', { key: a.key });
  t.equal(longer.json.bucket_width, 'day');
  t.same(longer.json.data.find((s: any) => s.meter === 'hot_storage_byte_seconds').buckets, [{ start: '2026-11-22T00:00:00.000Z', quantity: '289910292480000' }]);
  t.same(longer.json.data.map((s: any) => s.meter).sort(), ['compute_standard_seconds', 'egress_bytes', 'hot_storage_byte_seconds']);

  // The trial's summary: 56 included standard-hours, no overage → zero-priced lines, all visible.
  const sum = await rig.call('GET', '/v1/billing/usage-summary', { key: a.key });
  t.equal(sum.status, 200);
  t.match(sum.json, { status: 'estimate', catalog_version: '2026-11-01', plan_id: 'pro', trial: true, overage_allowed: false, total: '0.00',
    period: { start: '2026-11-22T06:00:00.000Z', end: '2026-12-06T06:00:00.000Z' } });
  t.same(sum.json.compute_credits, { used: '1.502', included: '56.000', billable: '0.000' });
  t.same(sum.json.lines.map((l: any) => [l.meter, l.quantity, l.included, l.billable, l.unit_price, l.amount]), [
    ['compute_small_seconds', '0', '0', '0', '0', '0.00'],
    ['compute_standard_seconds', '5410', '5410', '0', '0', '0.00'],
    ['compute_large_seconds', '0', '0', '0', '0', '0.00'],
    // 200 GB × 14 days included
    ['hot_storage_byte_seconds', '289910292480000', '259759622062080000', '0', '0', '0.00'],
    ['cold_storage_byte_seconds', '0', '0', '0', '0', '0.00'],
    ['egress_bytes', '1234', '53687091200', '0', '0', '0.00'],
  ]);

  // Bad input is a clean 400; another organization sees none of it.
  const bad = await rig.call('GET', '/v1/usage?start=yesterday', { key: a.key });
  t.equal(bad.status, 400);
  t.equal(bad.json.error.details[0].field, 'start');
  t.equal((await rig.call('GET', '/v1/usage?meter=cpu', { key: a.key })).status, 400);
  t.equal((await rig.call('GET', '/v1/usage?start=2026-11-23T00:00:00Z&end=2026-11-22T00:00:00Z', { key: a.key })).status, 400);
  t.equal((await rig.call('GET', '/v1/usage?cursor=nope', { key: a.key })).status, 400);
  const b = await rig.tenant('pro', ALL);
  t.same((await rig.call('GET', '/v1/usage?start=2026-11-22T00:00:00Z&end=2026-11-23T00:00:00Z', { key: b.key })).json.data, []);
  const none = await rig.tenant('none');
  t.equal((await rig.call('GET', '/v1/billing/usage-summary', { cookie: none.cookie })).status, 404, 'no period before subscribing');
});

t.test('a snapshot and a template deleted between flushes: their last stored seconds are recorded with the removal', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro', [...ALL, 'templates:read', 'templates:write']);
  const id = await running(rig, a.key, { size: 'small' });
  fake.substrate.machines.get(id)!.files.set('/home/agent/data', 'x'.repeat(5000));
  set(rig, '2026-11-22T06:10:00.000Z');
  const snap = await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: id } });
  t.equal(snap.json.state, 'ready');
  const tpl = await rig.call('POST', '/v1/templates?wait=true', { key: a.key, body: { name: 'tpl', snapshot_id: snap.json.id } });
  t.equal(tpl.json.state, 'ready');
  const snapBytes = (await rig.store.db.q().selectFrom('snapshots').select('size_bytes').where('id', '=', snap.json.id).executeTakeFirstOrThrow()).size_bytes!;
  const tplBytes = (await rig.store.db.q().selectFrom('templates').select('size_bytes').where('id', '=', tpl.json.id).executeTakeFirstOrThrow()).size_bytes!;
  t.ok(snapBytes > 0 && tplBytes > 0, 'both are stored with a size');

  set(rig, '2026-11-22T06:10:10.000Z');
  await rig.services.metering.flush();
  // Removed 15 s and 30 s after that flush; the next flush comes long after.
  set(rig, '2026-11-22T06:10:25.000Z');
  t.equal((await rig.call('DELETE', `/v1/templates/${tpl.json.id}`, { key: a.key })).status, 204);
  set(rig, '2026-11-22T06:10:40.000Z');
  t.equal((await rig.call('DELETE', `/v1/snapshots/${snap.json.id}`, { key: a.key })).status, 204);
  await until('the snapshot is gone', 100, async () => ((await rig.call('GET', `/v1/snapshots/${snap.json.id}`, { key: a.key })).status === 404 ? true : null));
  set(rig, '2026-11-22T06:20:00.000Z');
  await rig.services.metering.flush();

  const cold = await rig.call('GET', '/v1/usage?start=2026-11-22T06:00:00Z&end=2026-11-22T07:00:00Z&meter=cold_storage_byte_seconds', { key: a.key });
  const by = (f: (r: any) => boolean) => cold.json.data.filter(f).reduce((n: bigint, r: any) => n + BigInt(r.quantity), 0n);
  t.equal(by((r) => r.template_id === tpl.json.id), BigInt(tplBytes) * 25n, 'the template: 25 s, the 15 after the flush included');
  t.equal(by((r) => r.template_id === null && r.machine_id === id), BigInt(snapBytes) * 40n, 'the snapshot: 40 s, its last 30 included');
});

t.test('a paid plan with overage, then the period closes into a final summary', async (t) => {
  // A catalog whose pro plan includes 1 standard-hour and no hot storage, so small usage is billable.
  const base = CATALOG[0]!;
  const catalog: CatalogVersion[] = [{
    ...base,
    plans: base.plans.map((p) => (p.id === 'pro' ? { ...p, entitlements: { ...p.entitlements, included_compute_standard_hours: 1, included_hot_storage_gb: 0 } } : p)),
  }];
  const { rig } = await setup(t, catalog);
  const a = await rig.tenant('pro', ALL);
  await rig.services.builtin!.emit(a.orgId, 'trial.converted');
  const id = await running(rig, a.key, { size: 'large' });
  set(rig, '2026-11-22T08:00:00.000Z');
  rig.services.metering.egress.add(id, 3 * 1073741824);
  t.ok((await rig.call('DELETE', `/v1/machines/${id}`, { key: a.key })).status < 300);
  await settle(rig, a.key, id, 'deleted');
  await rig.services.metering.flush();

  const sum = (await rig.call('GET', '/v1/billing/usage-summary', { key: a.key })).json;
  t.match(sum, { status: 'estimate', trial: false, overage_allowed: true, period: { start: '2026-11-22T06:00:00.000Z', end: '2026-12-22T06:00:00.000Z' } });
  t.same(sum.lines.map((l: any) => [l.meter, l.quantity, l.included, l.billable, l.unit_price, l.amount]), [
    ['compute_small_seconds', '0', '0', '0', '0.12', '0.00'],
    ['compute_standard_seconds', '0', '0', '0', '0.12', '0.00'],
    // 2 h of large = 4 standard-hours; 1 included (1800 s of large); 3 × 0.12
    ['compute_large_seconds', '7200', '1800', '5400', '0.12', '0.36'],
    // 50 GB × 2 h = 100 GB-hours = 0.1389 GB-months × 0.10 → 0.01
    ['hot_storage_byte_seconds', '386547056640000', '0', '386547056640000', '0.10', '0.01'],
    ['cold_storage_byte_seconds', '0', '0', '0', '0.03', '0.00'],
    ['egress_bytes', '3221225472', '0', '3221225472', '0.05', '0.15'],
  ]);
  t.same(sum.compute_credits, { used: '4.000', included: '1.000', billable: '3.000' });
  t.equal(sum.total, '0.52');

  // After the period's end the summary is final, stored once, and found again by its start.
  set(rig, '2026-12-22T06:01:00.000Z');
  const fin = (await rig.call('GET', '/v1/billing/usage-summary', { key: a.key })).json;
  t.match(fin, { status: 'final', total: '0.52', metered_until: '2026-12-22T06:00:00.000Z' });
  rig.services.metering.egress.add(id, 999);
  set(rig, '2026-12-23T00:00:00.000Z');
  t.same((await rig.call('GET', '/v1/billing/usage-summary?period_start=2026-11-22T06:00:00.000Z', { key: a.key })).json, fin, 'final never changes');
  t.equal((await rig.call('GET', '/v1/billing/usage-summary?period_start=2025-01-01T00:00:00.000Z', { key: a.key })).status, 404);
});

t.test('a used-up trial: new work is refused 402 and running machines stop with disks captured', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const id = await running(rig, a.key, { size: 'standard' });
  set(rig, '2026-11-24T13:59:59.000Z'); // 55:59:59 of standard compute
  await rig.services.metering.flush();
  t.equal((await rig.call('GET', `/v1/machines/${id}`, { key: a.key })).json.state, 'running', 'one second short: still running');
  set(rig, '2026-11-24T14:00:00.000Z'); // exactly 56 standard-hours
  await rig.services.metering.flush();
  await settle(rig, a.key, id, 'stopped');
  const snaps = await until('the stop capture', 100, async () => {
    const r = await rig.call('GET', `/v1/snapshots?machine_id=${id}`, { key: a.key });
    return r.json.data.length && r.json.data[0].state === 'ready' ? r.json.data : null;
  });
  t.match(snaps, [{ origin: 'stop' }], 'the disk was captured (origin stop)');
  const refused = await rig.call('POST', '/v1/machines', { key: a.key, body: {} });
  t.equal(refused.status, 402);
  t.same(refused.json.error.quota, { limit: 'subscription', current: 56, maximum: 56, plan_id: 'pro', upgrade_url: refused.json.error.quota.upgrade_url });
  t.equal((await rig.call('POST', `/v1/machines/${id}/start`, { key: a.key })).status, 402, 'starting is new work too');
});

t.test('a billing event from the operator CLI is acted on by the server, never left half done', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const id = await running(rig, a.key, { size: 'small' });
  const out: string[] = [];
  t.equal(await runCli(['billing-event', a.orgId, 'subscription.canceled'], rig.config, (s) => out.push(s)), 0, out.join('\n'));
  t.same(out, ['account is now canceled']);
  t.equal((await rig.call('GET', `/v1/machines/${id}`, { key: a.key })).json.state, 'running', 'the CLI did not start a stop it cannot finish');
  await rig.services.enforceAll();
  await settle(rig, a.key, id, 'stopped');
  t.pass('the server stopped it');
});

// The child opens the rig's SQLite file directly (a second process on the same file): SQLite's drill; PostgreSQL's
// crash drills run processes on one database.
t.test('kill -9 while flushing: records and cursor always agree (nothing lost that was committed, nothing twice)', { skip: TEST_ENGINE === 'postgres' ? 'the child opens the SQLite file' : false }, async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const id = await running(rig, a.key, { size: 'standard' });
  await rig.services.metering.flush();
  const dir = rig.dir;
  const child = path.join(dir, 'meter.mts');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(child, `
import { openDb } from ${JSON.stringify(path.join(REPO, 'control-plane/src/store/db.js'))};
import { createStore } from ${JSON.stringify(path.join(REPO, 'control-plane/src/store/store.js'))};
import { createMeteringService } from ${JSON.stringify(path.join(REPO, 'control-plane/src/services/metering.js'))};
const store = createStore(openDb(${JSON.stringify(path.join(dir, DB_FILENAME))}));
let k = 0;
const m = createMeteringService({ store, now: () => new Date(${T0} + k * 1700 + 300) });
for (;;) { k++; m.egress.add(${JSON.stringify(id)}, 7); await m.flush(); process.stdout.write(k + '\\n'); }
`);
  const proc = spawn(process.execPath, [...process.execArgv, child], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (b) => (out += b));
  proc.stderr.on('data', (b) => (out += b));
  const exited = new Promise<unknown>((r) => proc.on('exit', (code, sig) => r(sig ?? code)));
  await until('200 flushes', 600, async () => (out.split('\n').length > 200 ? true : null));
  proc.kill('SIGKILL');
  t.equal(await exited, 'SIGKILL');
  const acked = Math.max(...out.split('\n').filter((l) => /^\d+$/.test(l)).map(Number));

  const db = openDb(path.join(dir, DB_FILENAME));
  t.teardown(() => db.close());
  const until_ = (await db.q().selectFrom('meter_cursors').select('metered_until').where('source_id', '=', id).executeTakeFirstOrThrow()).metered_until;
  const k = (Date.parse(until_) - 300 - T0) / 1700;
  t.ok(Number.isInteger(k) && k >= acked, `the cursor is at a committed flush (${k} ≥ ${acked} acknowledged)`);
  const sum = async (meter: Meter) => BigInt((await db.q().selectFrom('usage_records').select((eb) => eb.cast<string>(eb.fn.sum('quantity'), 'text').as('q')).where('source_id', '=', id).where('meter', '=', meter).executeTakeFirstOrThrow()).q);
  const secs = BigInt(Math.floor(Date.parse(until_) / 1000) - Math.floor(T0 / 1000));
  t.equal((await sum('compute_standard_seconds')), secs, 'compute = cursor − start, exactly');
  t.equal((await sum('hot_storage_byte_seconds')), secs * BigInt(STANDARD_DISK), 'hot storage likewise');
  t.equal((await sum('egress_bytes')), BigInt(7 * k), 'egress: 7 bytes per committed flush, none twice');
});


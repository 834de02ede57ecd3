/**
 * Host admission control: the pure rule (domain/capacity.ts) with pinned numbers, and through /v1 a host
 * of 23.5 GiB and 8 CPUs where one free trial asks for 3 standard machines (24 GiB): the third boot is
 * refused with 503 compute_unavailable and Retry-After, whichever path boots it, and concurrent boots
 * never overshoot.
 */
import t from 'tap';
import { committedBy, decideCapacity } from '../../control-plane/src/domain/capacity.js';
import { CATALOG } from '../../control-plane/src/domain/catalog.js';
import { parseConfig } from '../../control-plane/src/config.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';

const HOST = { memory_mb: 24064, vcpu: 8 }; // 23.5 GiB
const RATIOS = { memory: 0.9, cpu: 4 };

t.test('the rule, with pinned numbers', async (t) => {
  const none = { memory_mb: 0, vcpu: 0 };
  const standard = { memory_mb: 8192, vcpu: 4 };
  // limit: floor(24064 × 0.9) = 21657 MiB, 32 vCPU
  t.same(decideCapacity(HOST, RATIOS, none, standard), { ok: true });
  t.same(decideCapacity(HOST, RATIOS, { memory_mb: 8192, vcpu: 4 }, standard), { ok: true }, 'two standard: 16384 MiB');
  t.same(decideCapacity(HOST, RATIOS, { memory_mb: 16384, vcpu: 8 }, standard), { ok: false, resource: 'memory', committed: 16384, adding: 8192, limit: 21657 }, 'three standard: 24576 > 21657');
  t.same(decideCapacity(HOST, RATIOS, { memory_mb: 16384, vcpu: 8 }, { memory_mb: 4096, vcpu: 2 }), { ok: true }, 'a small one still fits: 20480');
  t.same(decideCapacity(HOST, RATIOS, { memory_mb: 21657 - 4096, vcpu: 0 }, { memory_mb: 4096, vcpu: 2 }), { ok: true }, 'exactly at the limit is allowed');
  t.same(decideCapacity({ memory_mb: 1_000_000, vcpu: 2 }, RATIOS, { memory_mb: 0, vcpu: 6 }, { memory_mb: 4096, vcpu: 2 }), { ok: true }, '8 vCPU on 2 CPUs at ratio 4');
  t.same(decideCapacity({ memory_mb: 1_000_000, vcpu: 2 }, RATIOS, { memory_mb: 0, vcpu: 8 }, { memory_mb: 4096, vcpu: 2 }), { ok: false, resource: 'cpu', committed: 8, adding: 2, limit: 8 }, 'CPU is a limit too');
  const sizes = CATALOG[0]!.sizes;
  t.same(committedBy([{ size: 'small', n: 2 }, { size: 'standard', n: 1 }], sizes), { vcpu: 8, memory_mb: 16384 });
  t.same(committedBy([{ size: 'retired', n: 1 }], sizes), { vcpu: 8, memory_mb: 16384 }, 'an unknown size counts as the largest');
});

t.test('config: defaults and bounds of the commit ratios', async (t) => {
  t.same(parseConfig({}).commitRatios, { memory: 0.9, cpu: 4 });
  t.same(parseConfig({ MACHINE_MEMORY_COMMIT_RATIO: '1.5', MACHINE_CPU_COMMIT_RATIO: '1' }).commitRatios, { memory: 1.5, cpu: 1 });
  t.throws(() => parseConfig({ MACHINE_MEMORY_COMMIT_RATIO: '0' }));
  t.throws(() => parseConfig({ MACHINE_CPU_COMMIT_RATIO: '-1' }));
  t.throws(() => parseConfig({ MACHINE_CPU_COMMIT_RATIO: 'lots' }));
});

t.test('a free trial cannot put 24 GiB of machines on a 23.5 GiB host', async (t) => {
  const sub = new FakeSubstrate();
  const rig = await makeMachinesRig({ substrate: sub, services: { readyProbe: false, hostResources: HOST } });
  t.teardown(() => rig.close());
  const trial = await rig.tenant('developer');
  const other = await rig.tenant('pro');
  const create = (key: string, name: string, extra: Record<string, unknown> = {}) =>
    rig.call('POST', '/v1/machines', { key, body: { name, size: 'standard', ...extra } });

  t.equal((await create(trial.key, 's1')).status, 201);
  const s2 = await create(trial.key, 's2');
  t.equal(s2.status, 201);
  const s3 = await create(trial.key, 's3');
  assertEnvelope(t, s3, 'compute_unavailable', 503);
  t.equal(s3.headers.get('retry-after'), '30');
  t.notMatch(s3.json.error.message, /\d{4}/, 'no host figures in the message');
  t.equal(sub.machines.size, 2, 'nothing was created on the host for the refused machine');
  // Another organization is refused too: the host is full, not the trial's quota.
  assertEnvelope(t, await create(other.key, 'o1'), 'compute_unavailable', 503);
  // A stopped machine can still be created (it commits nothing) but not started.
  const cold = await create(trial.key, 'cold', { start: false });
  t.equal(cold.status, 201);
  t.equal(cold.json.state, 'stopped');
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${cold.json.id}/start`, { key: trial.key }), 'compute_unavailable', 503);
  t.equal((await rig.call('GET', `/v1/machines/${cold.json.id}`, { key: trial.key })).json.state, 'stopped', 'the refused start left it stopped');
  // Stopping one frees its room: now the other start fits, and a restart of a running one still does.
  t.equal((await rig.call('POST', `/v1/machines/${s2.json.id}/stop`, { key: trial.key })).status, 200);
  t.equal((await rig.call('POST', `/v1/machines/${cold.json.id}/start`, { key: trial.key })).json.state, 'running');
  t.equal((await rig.call('POST', `/v1/machines/${cold.json.id}/restart`, { key: trial.key })).json.state, 'running');
  // s2 cannot come back while s1 and cold run.
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${s2.json.id}/start`, { key: trial.key }), 'compute_unavailable', 503);
  // A small one fits in what is left (16384 + 4096 ≤ 21657).
  t.equal((await create(other.key, 'small-one', { size: 'small' })).status, 201);
});

t.test('concurrent boots never overshoot the host', async (t) => {
  const sub = new FakeSubstrate({ delays: { create: 20, start: 20 } });
  // Room for exactly 5 small machines (5 × 4096 ≤ floor(23000 × 0.9) = 20700 < 6 × 4096).
  const rig = await makeMachinesRig({ substrate: sub, services: { readyProbe: false, hostResources: { memory_mb: 23000, vcpu: 64 } } });
  t.teardown(() => rig.close());
  const tenants = await Promise.all([rig.tenant('pro'), rig.tenant('pro'), rig.tenant('pro')]);
  const stopped = await rig.call('POST', '/v1/machines', { key: tenants[0]!.key, body: { name: 'st', size: 'small', start: false } });
  const calls = [
    ...Array.from({ length: 9 }, (_, i) => rig.call('POST', '/v1/machines', { key: tenants[i % 3]!.key, body: { name: `c${i}`, size: 'small' } })),
    rig.call('POST', `/v1/machines/${stopped.json.id}/start`, { key: tenants[0]!.key }),
  ];
  const res = await Promise.all(calls);
  const ok = res.filter((r) => r.status === 200 || r.status === 201).length;
  t.equal(ok, 5, 'exactly five boots admitted');
  t.equal(res.filter((r) => r.status === 503 && r.json?.error?.code === 'compute_unavailable').length, 5, 'the rest refused with 503');
  t.equal((await rig.store.machines.inStates(['creating', 'starting', 'running', 'stopping'])).length, 5);
});

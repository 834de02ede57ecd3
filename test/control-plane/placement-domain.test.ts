/**
 * Placement's pure decision (domain/placement.ts, issue 25 item 2), table-tested literally: region hint, host
 * states, memory / CPU / disk fit under the policy, and the spread order (most free memory, fewest machines, id).
 */
import t from 'tap';
import { computeFit, decidePlacement, hostFit, PLACEMENT_POLICY, type PlacementCandidate, type PlacementNeed } from '../../control-plane/src/domain/placement.js';

const GIB = 1024 * 1024 * 1024;
/** 10 GiB of memory (9216 MiB committable at 0.9), 2 cores (8 vCPUs at 4×), 30 GiB of disk. */
const SHAPE = { cores: 2, memory_bytes: 10 * GIB, disk_bytes: 30 * GIB };
const EMPTY = { memory_mb: 0, vcpu: 0, disk_gb: 0, machines: 0 };
const SMALL: PlacementNeed = { memory_mb: 4096, vcpu: 2, disk_gb: 10 };

function host(id: string, over: Partial<PlacementCandidate> = {}): PlacementCandidate {
  return { id, region: 'default', state: 'active', capacity: SHAPE, placed: EMPTY, ...over };
}

t.test('the policy is stated', async (t) => {
  t.same(PLACEMENT_POLICY, { memory: 0.9, cpu: 4 });
});

t.test('one host: fit by state, region and resources', async (t) => {
  const rows: Array<[string, PlacementCandidate, PlacementNeed, string | null, string]> = [
    ['empty active host', host('h'), SMALL, null, 'ok free=5120'],
    ['the hint names its region', host('h', { region: 'eu' }), SMALL, 'eu', 'ok free=5120'],
    ['another region', host('h', { region: 'eu' }), SMALL, 'us', 'other_region'],
    ['cordoned', host('h', { state: 'cordoned' }), SMALL, null, 'not_active'],
    ['draining', host('h', { state: 'draining' }), SMALL, null, 'not_active'],
    ['down', host('h', { state: 'down' }), SMALL, null, 'not_active'],
    ['one small placed: a second fits (8192 ≤ 9216)', host('h', { placed: { memory_mb: 4096, vcpu: 2, disk_gb: 10, machines: 1 } }), SMALL, null, 'ok free=1024'],
    ['two small placed: memory full (12288 > 9216)', host('h', { placed: { memory_mb: 8192, vcpu: 4, disk_gb: 20, machines: 2 } }), SMALL, null, 'memory'],
    ['memory exactly at the limit fits', host('h', { placed: { memory_mb: 5120, vcpu: 0, disk_gb: 0, machines: 1 } }), SMALL, null, 'ok free=0'],
    ['vCPUs overcommitted to 4× cores, not past it', host('h', { placed: { memory_mb: 0, vcpu: 7, disk_gb: 0, machines: 1 } }), SMALL, null, 'cpu'],
    ['vCPUs at exactly 4× cores fit', host('h', { placed: { memory_mb: 0, vcpu: 6, disk_gb: 0, machines: 1 } }), SMALL, null, 'ok free=5120'],
    ['disks never overcommitted (stopped machines hold 25 GiB)', host('h', { placed: { memory_mb: 0, vcpu: 0, disk_gb: 25, machines: 3 } }), SMALL, null, 'disk'],
    ['disk exactly full fits', host('h', { placed: { memory_mb: 0, vcpu: 0, disk_gb: 20, machines: 2 } }), SMALL, null, 'ok free=5120'],
  ];
  for (const [name, h, need, region, want] of rows) {
    const f = hostFit(h, need, region);
    t.equal(f.ok ? `ok free=${f.freeMemoryMb}` : f.misfit, want, name);
  }
  // A start of a machine already on a cordoned host: only the resources count (no disk added).
  const start = computeFit(host('h', { state: 'cordoned', placed: { memory_mb: 4096, vcpu: 2, disk_gb: 30, machines: 3 } }), { memory_mb: 4096, vcpu: 2, disk_gb: 0 });
  t.same(start, { ok: true, freeMemoryMb: 1024 });
});

t.test('decisions over several hosts', async (t) => {
  const full = { memory_mb: 8192, vcpu: 4, disk_gb: 20, machines: 2 };
  const one = { memory_mb: 4096, vcpu: 2, disk_gb: 10, machines: 1 };
  const rows: Array<[string, PlacementCandidate[], string | null, unknown]> = [
    ['no host registered', [], null, { kind: 'unregistered' }],
    ['no host registered, a hint: nothing to check it against', [], 'eu', { kind: 'unregistered' }],
    ['a region no host ever registered', [host('a'), host('b', { region: 'eu' })], 'us', { kind: 'unknown_region', region: 'us' }],
    ['a region only a down host registered is known, but nothing fits there', [host('a'), host('b', { region: 'eu', state: 'down' })], 'eu', { kind: 'no_room' }],
    ['every host full', [host('a', { placed: full }), host('b', { placed: full })], null, { kind: 'no_room' }],
    ['only cordoned / draining / down hosts have room', [host('a', { placed: full }), host('b', { state: 'cordoned' }), host('c', { state: 'draining' }), host('d', { state: 'down' })], null, { kind: 'no_room' }],
    ['most free memory first', [host('a', { placed: one }), host('b'), host('c', { placed: full })], null, { kind: 'ranked', hosts: ['b', 'a'] }],
    ['the hint keeps to its region', [host('a', { region: 'eu', placed: one }), host('b')], 'eu', { kind: 'ranked', hosts: ['a'] }],
    [
      'equal free memory: fewest machines first (stopped machines count)',
      [host('a', { placed: { ...EMPTY, machines: 2, disk_gb: 20 } }), host('b', { placed: { ...EMPTY, machines: 1, disk_gb: 10 } })],
      null,
      { kind: 'ranked', hosts: ['b', 'a'] },
    ],
    ['equal free memory and machines: id in byte order', [host('h_b'), host('h_B'), host('h_a')], null, { kind: 'ranked', hosts: ['h_B', 'h_a', 'h_b'] }],
    [
      'a bigger host with more used still has more free',
      [host('small'), host('big', { capacity: { ...SHAPE, memory_bytes: 40 * GIB }, placed: { memory_mb: 16384, vcpu: 4, disk_gb: 20, machines: 4 } })],
      null,
      { kind: 'ranked', hosts: ['big', 'small'] },
    ],
  ];
  for (const [name, hosts, region, want] of rows) t.same(decidePlacement(hosts, { need: SMALL, region }), want, name);
});

/**
 * Who owns a machine, from the store (control-plane/src/cluster/owner-of.ts): the table pinned literally, the
 * registered URL's format (a host row is parsed, never trusted), and the lookup from machine to host to process;
 * the arriving side's cache of remote owners (cluster/owner-cache.ts), on a clock the test moves.
 */
import t from 'tap';
import { decideOwner, ownerOfFromStore, parseRegisteredUrl, registeredUrl, type OwnerLookups } from '../../../control-plane/src/cluster/owner-of.js';
import type { HostRow } from '../../../control-plane/src/store/repos/hosts.js';
import { ownerCache } from '../../../control-plane/src/cluster/owner-cache.js';

const ME = 'cp-aaaaaaaaaaaaaaaaaaaaaaaa';
const THEM = 'cp-bbbbbbbbbbbbbbbbbbbbbbbb';
const mine = 'http://127.0.0.1:7001/cp-aaaaaaaaaaaaaaaaaaaaaaaa';
const theirs = 'http://127.0.0.1:7002/cp-bbbbbbbbbbbbbbbbbbbbbbbb';
const REMOTE = { kind: 'remote', processId: THEM, address: 'http://127.0.0.1:7002' };

t.test('the table', async (t) => {
  const driving = { processId: ME, driving: true };
  const stale = { processId: ME, driving: false };
  t.same(decideOwner({ state: 'active', internal_url: mine }, driving), { kind: 'local' });
  t.same(decideOwner({ state: 'cordoned', internal_url: mine }, driving), { kind: 'local' });
  t.same(decideOwner({ state: 'draining', internal_url: mine }, driving), { kind: 'local' });
  t.same(decideOwner({ state: 'active', internal_url: mine }, stale), null, 'registered as me but no longer driving');
  t.same(decideOwner({ state: 'active', internal_url: theirs }, driving), REMOTE);
  t.same(decideOwner({ state: 'cordoned', internal_url: theirs }, stale), REMOTE);
  t.same(decideOwner({ state: 'active', internal_url: null }, driving), null, 'no driver registered');
  t.same(decideOwner({ state: 'down', internal_url: mine }, driving), null);
  t.same(decideOwner({ state: 'down', internal_url: theirs }, driving), null);
  t.same(decideOwner(undefined, driving), null, 'no such host');
});

t.test('a registered URL is parsed, never trusted', async (t) => {
  t.equal(registeredUrl('http://127.0.0.1:7002', THEM), theirs);
  t.same(parseRegisteredUrl(theirs), { address: 'http://127.0.0.1:7002', processId: THEM });
  t.same(parseRegisteredUrl('http://[::1]:7002/cp-bbbbbbbbbbbbbbbbbbbbbbbb'), { address: 'http://[::1]:7002', processId: THEM });
  for (const bad of [null, 'not a url', 'https://127.0.0.1:7002/cp-bbbbbbbbbbbbbbbbbbbbbbbb', 'http://127.0.0.1/cp-bbbbbbbbbbbbbbbbbbbbbbbb',
    'http://127.0.0.1:7002/', 'http://127.0.0.1:7002/cp-bbbb', 'http://127.0.0.1:7002/cp-bbbbbbbbbbbbbbbbbbbbbbbb?x=1',
    'http://u:p@127.0.0.1:7002/cp-bbbbbbbbbbbbbbbbbbbbbbbb', `http://127.0.0.1:7002/${'x'.repeat(400)}`]) {
    t.equal(parseRegisteredUrl(bad), null, String(bad));
  }
});

t.test('machine → host → owner', async (t) => {
  const host = (id: string, internal_url: string | null): HostRow => ({
    id, region: 'default', state: 'active', epoch: 1, internal_url, capacity: { cores: 1, memory_bytes: 1, disk_bytes: 1, machines: {} },
    heartbeat_at: null, created_at: '', updated_at: '',
  });
  const hosts = new Map([['host_a', host('host_a', mine)], ['host_b', host('host_b', theirs)]]);
  const machines = new Map<string, string | null>([['mch_a', 'host_a'], ['mch_b', 'host_b'], ['mch_old', null], ['mch_gone', 'host_z']]);
  let ids = ['host_a', 'host_b'];
  const l: OwnerLookups = {
    machineHost: async (id) => {
      const hostId = machines.get(id);
      return hostId === undefined ? undefined : { hostId, host: hostId === null ? undefined : hosts.get(hostId) };
    },
    host: async (id) => hosts.get(id),
    hostIds: async () => ids,
  };
  const ownerOf = ownerOfFromStore(l, { processId: ME, driving: () => true });
  t.same(await ownerOf('mch_a'), { kind: 'local' });
  t.same(await ownerOf('mch_b'), REMOTE);
  t.same(await ownerOf('mch_unknown'), { kind: 'local' }, 'no such machine: served here (its 404)');
  await t.rejects(ownerOf('mch_gone'), { name: 'OwnerUnavailable' });
  await t.rejects(ownerOf('mch_old'), { name: 'OwnerUnavailable' }, 'no host_id among several hosts');
  ids = ['host_b'];
  t.same(await ownerOf('mch_old'), REMOTE, 'no host_id: the only host');
});

t.test('the owner cache (cluster/owner-cache.ts): remembered for its time, forgotten on demand, bounded', async (t) => {
  let now = 0;
  const them = { kind: 'remote' as const, processId: THEM, address: 'http://127.0.0.1:7002' };
  const cache = ownerCache({ ttlMs: 1000, now: () => now, maxEntries: 2 });
  t.equal(cache.get('mch_a'), null, 'nothing remembered at first');
  cache.set('mch_a', them);
  now = 999;
  t.same(cache.get('mch_a'), them, 'remembered for less than its time');
  now = 1000;
  t.equal(cache.get('mch_a'), null, 'forgotten once its time has passed');
  cache.set('mch_a', them);
  cache.delete('mch_a');
  t.equal(cache.get('mch_a'), null, 'forgotten on demand (its driver refused)');
  cache.set('mch_a', them);
  cache.set('mch_b', them);
  cache.set('mch_c', them);
  t.equal(cache.get('mch_a'), null, 'past the bound, the oldest goes');
  t.same([cache.get('mch_b'), cache.get('mch_c')], [them, them]);
  const off = ownerCache({ ttlMs: 0, now: () => now });
  off.set('mch_a', them);
  t.equal(off.get('mch_a'), null, 'OWNER_CACHE_MS=0 remembers nothing');
});

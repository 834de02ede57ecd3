/**
 * Remembered keys (control-plane/src/services/key-cache.ts), with a clock and a reader of our own: how long a key's
 * principal is kept, that only a valid key is, that forget() drops everything and outruns a read in flight, and the
 * bound. The same rule through the service and a real store: test/control-plane/cluster/key-cache-processes.test.ts.
 */
import t from 'tap';
import type { OrgPrincipal } from '../../control-plane/src/context.js';
import { keyCache } from '../../control-plane/src/services/key-cache.js';

const principal = (id: string): OrgPrincipal => ({
  kind: 'api_key', user_id: 'usr_1', auth_session_id: null, api_key_id: id, org_id: 'org_1', role: 'member',
  scopes: null, permissions: new Set(['machines:control'] as const), via_cookie: false,
});

function rig(ttlMs: number, maxEntries?: number) {
  let clock = 0;
  const reads: string[] = [];
  let hold: Promise<void> | null = null;
  const cache = keyCache(async (secret) => {
    reads.push(secret);
    if (hold) await hold;
    return secret.startsWith('sk_good') ? principal(`key_${secret.slice(8)}`) : null;
  }, { ttlMs, now: () => clock, ...(maxEntries ? { maxEntries } : {}) });
  return {
    cache, reads,
    at: (ms: number) => void (clock = ms),
    holdReads: () => {
      let release = () => {};
      hold = new Promise<void>((r) => (release = r));
      return () => {
        hold = null;
        release();
      };
    },
  };
}

t.test('a valid key is read once and remembered for ttlMs, then read again', async (t) => {
  const r = rig(1000);
  t.equal((await r.cache.principal('sk_good_a'))?.api_key_id, 'key_a');
  r.at(999);
  t.equal((await r.cache.principal('sk_good_a'))?.api_key_id, 'key_a');
  t.same(r.reads, ['sk_good_a'], 'remembered until 999 ms');
  r.at(1000);
  await r.cache.principal('sk_good_a');
  t.same(r.reads, ['sk_good_a', 'sk_good_a'], 'read again at 1000 ms');
});

t.test('a key that is not valid is never remembered', async (t) => {
  const r = rig(1000);
  t.equal(await r.cache.principal('sk_bad'), null);
  t.equal(await r.cache.principal('sk_bad'), null);
  t.same(r.reads, ['sk_bad', 'sk_bad']);
});

t.test('forget() drops every key, and a read that began before it is not remembered', async (t) => {
  const r = rig(1000);
  await r.cache.principal('sk_good_a');
  await r.cache.principal('sk_good_b');
  r.cache.forget();
  await r.cache.principal('sk_good_a');
  await r.cache.principal('sk_good_b');
  t.same(r.reads, ['sk_good_a', 'sk_good_b', 'sk_good_a', 'sk_good_b'], 'both read again after forget()');
  r.at(5000);
  const release = r.holdReads();
  const inFlight = r.cache.principal('sk_good_c');
  r.cache.forget();
  release();
  t.equal((await inFlight)?.api_key_id, 'key_c', 'the read in flight answers its caller');
  await r.cache.principal('sk_good_c');
  t.same(r.reads.slice(4), ['sk_good_c', 'sk_good_c'], 'but what it read is not kept past the forget()');
});

t.test('ttlMs 0: every request reads the key', async (t) => {
  const r = rig(0);
  await r.cache.principal('sk_good_a');
  await r.cache.principal('sk_good_a');
  t.same(r.reads, ['sk_good_a', 'sk_good_a']);
});

t.test('at most maxEntries keys, the oldest dropped first', async (t) => {
  const r = rig(1000, 2);
  await r.cache.principal('sk_good_a');
  await r.cache.principal('sk_good_b');
  await r.cache.principal('sk_good_c');
  await r.cache.principal('sk_good_c');
  await r.cache.principal('sk_good_b');
  await r.cache.principal('sk_good_a');
  t.same(r.reads, ['sk_good_a', 'sk_good_b', 'sk_good_c', 'sk_good_a'], 'b and c kept, a dropped');
});

import t from 'tap';
import { checkInput, decideAcquire, decideRelease, type LeaseRow } from '../../control-plane/src/domain/lease.js';

const apply = (row: LeaseRow | null, d: ReturnType<typeof decideAcquire>): LeaseRow | null =>
  d.kind === 'conflict' ? row : { machine_id: 'm', session_id: d.lease.session_id, fence: d.lease.fence, expires_at: d.lease.expires_at };

t.test('grant, renew, conflict, force, expiry, release', async (t) => {
  let now = 1_000_000;
  let row: LeaseRow | null = null;
  let d = decideAcquire(row, { session_id: 'a', ttl_seconds: 60, force: false, now });
  t.equal(d.kind, 'granted');
  row = apply(row, d);
  t.equal(row!.fence, 1);

  now += 1000;
  d = decideAcquire(row, { session_id: 'a', ttl_seconds: 60, force: false, now });
  t.equal(d.kind, 'renewed', 'holder renews');
  row = apply(row, d);
  t.equal(row!.fence, 1, 'renewal keeps the fence');
  t.equal(row!.expires_at, now + 60_000);

  d = decideAcquire(row, { session_id: 'b', ttl_seconds: 60, force: false, now });
  t.match(d, { kind: 'conflict', holder: 'a', fence: 1 });

  d = decideAcquire(row, { session_id: 'b', ttl_seconds: 30, force: true, now });
  t.match(d, { kind: 'granted', revoked: 'a' });
  row = apply(row, d);
  t.equal(row!.fence, 2, 'takeover increments');
  t.match(checkInput(row, 'a', 1, now), { ok: false, reason: 'not_holder' });
  t.match(checkInput(row, 'b', 1, now), { ok: false, reason: 'stale_fence' });
  t.match(checkInput(row, 'b', 3, now), { ok: false, reason: 'stale_fence' }, 'a higher fence is refused too');
  t.match(checkInput(row, 'b', 2, now), { ok: true, fence: 2 });
  t.match(checkInput(row, 'b', null, now), { ok: true });

  now += 31_000;
  t.match(checkInput(row, 'b', 2, now), { ok: false, reason: 'no_lease' }, 'expired');
  d = decideAcquire(row, { session_id: 'b', ttl_seconds: 60, force: false, now });
  t.equal(d.kind, 'granted', 'after expiry the old holder gets a new grant');
  row = apply(row, d);
  t.equal(row!.fence, 3, 'the next grant after expiry increments');

  t.match(decideRelease(row, 'a', now), { kind: 'not_holder', holder: 'b' });
  t.match(decideRelease(row, 'b', now), { kind: 'released', session_id: 'b' });
  t.match(decideRelease(null, 'b', now), { kind: 'not_held' });
});

t.test('fence is monotonic over random operation sequences', async (t) => {
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  // Widened on purpose: initialized to null, TS would narrow `row` to null across the loop's back edge.
  let row = null as LeaseRow | null;
  let now = 0;
  let last = 0;
  let grants = 0;
  let decreased = 0;
  for (let i = 0; i < 5000; i++) {
    now += Math.floor(rnd() * 20_000);
    const who = ['a', 'b', 'c'][Math.floor(rnd() * 3)]!;
    if (rnd() < 0.1 && row) {
      const r = decideRelease(row, who, now);
      if (r.kind === 'released') row = { ...row, session_id: null };
      continue;
    }
    const d = decideAcquire(row, { session_id: who, ttl_seconds: 5 + Math.floor(rnd() * 30), force: rnd() < 0.2, now });
    if (d.kind === 'granted') grants++;
    row = apply(row, d);
    if ((row?.fence ?? 0) < last) decreased++;
    last = row?.fence ?? 0;
  }
  t.equal(decreased, 0, 'the fence never decreases');
  t.equal(last, grants, 'the fence counts grants exactly');
});

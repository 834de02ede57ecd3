/**
 * Attack: lock a user out by failing logins to their address on purpose. Before the fix, 10 failures
 * per e-mail (from anywhere) locked the address for 15 minutes, right password included. Now the victim,
 * from their own IP, logs in whatever others do; the attacker is slowed per (address, IP) and capped per IP.
 */
import t from 'tap';
import { assertEnvelope, makeRig } from '../helpers/control-plane.js';

t.test('failing on purpose cannot lock a user out', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const password = 'the victim knows this';
  const victim = 'victim@example.com';
  t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: victim, password }, ip: '203.0.113.10' })).status, 201);
  const attempt = (email: string, pw: string, ip: string) => rig.call('POST', '/v1/auth/login', { body: { email, password: pw }, ip });

  // One attacker IP hammers the victim's address.
  const seen: number[] = [];
  for (let i = 0; i < 60; i++) seen.push((await attempt(victim, `guess ${i}`, '198.18.0.66')).status);
  t.same(seen.slice(0, 5), [401, 401, 401, 401, 401], 'five free failures');
  t.ok(seen.slice(5).every((s) => s === 429), 'then the attacker waits (backoff)');
  t.equal((await attempt(victim, password, '203.0.113.10')).status, 200, 'the victim logs in from their own IP');

  // Twenty attacker IPs, five failures each (100 failures on the address).
  for (let ip = 1; ip <= 20; ip++) for (let i = 0; i < 5; i++) await attempt(victim, 'nope', `198.18.1.${ip}`);
  t.equal((await attempt(victim, password, '203.0.113.10')).status, 200, 'still: a distributed attack does not lock them out');
  t.equal((await attempt(victim, password, '203.0.113.99')).status, 200, 'nor from a new IP of theirs');

  // The attacker's backoff grows while it keeps failing (1 s, 2 s, 4 s, … capped at 15 min).
  const waits: string[] = [];
  for (let i = 0; i < 17; i++) {
    const r = await attempt(victim, `again ${i}`, '198.18.0.67');
    if (r.status === 429) {
      waits.push(r.headers.get('retry-after')!);
      rig.clock.t += Number(r.headers.get('retry-after')) * 1000;
    }
  }
  t.same(waits, ['1', '2', '4', '8', '16', '32'], 'exponential backoff for the guessing pair');

  // A password sprayer is capped per IP across addresses (100 failures / 15 min); logging in to an
  // account of its own does not reset that.
  t.equal((await rig.call('POST', '/v1/auth/signup', { body: { email: 'sprayer@example.com', password }, ip: '198.18.2.1' })).status, 201);
  for (let i = 0; i < 100; i++) await attempt(`user${i}@example.com`, 'Winter2026!', '198.18.2.1');
  t.equal((await attempt('sprayer@example.com', password, '198.18.2.1')).status, 429, 'the IP is capped, right password or not');
  const capped = await attempt('fresh@example.com', 'Winter2026!', '198.18.2.1');
  assertEnvelope(t, capped, 'rate_limited', 429);
  t.equal((await attempt('sprayer@example.com', password, '198.18.2.2')).status, 200, 'another IP is not');
  t.equal((await attempt(victim, password, '203.0.113.10')).status, 200, 'and the victim never was');
});

/**
 * Placement's locked re-check through real processes (issue 25 item 2): two `serve()` processes on one PostgreSQL
 * and one DATA_DIR, so one host (room for two small machines), which one of them drives; four tenants create at
 * once, the calls split between the processes (the other forwards its creates to the driver), the inserts held (helpers/pg-hold.ts) until all four wait on a lock, so without the host's
 * row lock all four would have counted an empty host. Exactly two are created, with the host recorded; the others
 * answer 503 compute_unavailable with Retry-After and a message naming capacity, never the host.
 */
import t from 'tap';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { hostsRepo } from '../../../control-plane/src/store/repos/hosts.js';
import { race, startServed } from '../../helpers/served-processes.js';

const GIB = 1024 * 1024 * 1024;

t.test('postgres: two processes on one host never overfill it', async (t) => {
  // 10 GiB: two small machines (2 × 4096 ≤ 0.9 × 10240 MiB), not three.
  const s = await startServed(t, 'postgres', { hostShape: { cores: 2, memory_bytes: 10 * GIB, disk_bytes: 100 * GIB } });
  const db = await openStoreDb({ databaseUrl: s.url!, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  const hosts = (await hostsRepo(db).list()).hosts;
  t.equal(hosts.length, 1, 'the two processes are one host');
  const HOST = hosts[0]!.id;
  t.match(HOST, /^host_[0-9a-z]+$/);
  const keys: string[] = [];
  for (let i = 0; i < 4; i++) keys.push((await s.tenant('developer')).key);

  const replies = await race(s, 'machines', 4, (b, i) => s.call(b, 'POST', '/v1/machines', { key: keys[i]!, body: { name: `placed-${i}` } }));
  t.same(replies.map((r) => r.status).sort(), [201, 201, 503, 503], JSON.stringify(replies.map((r) => r.json)));
  for (const r of replies.filter((r) => r.status === 503)) {
    t.equal(r.json.error.code, 'compute_unavailable');
    t.equal(r.json.error.message, 'No host has the capacity (memory, CPU and disk) for another small machine right now; retry later, or stop or delete a machine.');
    t.notMatch(JSON.stringify(r.json), /host_/, 'no host id in a tenant answer');
  }
  const rows = await db.q().selectFrom('machines').select(['host_id']).where('deleted_at', 'is', null).execute();
  t.same(rows.map((r) => r.host_id), [HOST, HOST], 'both machines recorded on the host');

  const region = await s.call(s.base(0), 'POST', '/v1/machines', { key: keys[3]!, body: { region: 'mars', start: false } });
  t.equal(region.status, 400, 'a region no host has is refused where it arrives (placeFor, before forwarding)');
  t.equal(region.json.error.code, 'invalid_request');
});

/**
 * A full DATA_DIR (issue 14 item 1, the control-plane half), on a real 32 MiB tmpfs holding the database:
 * below the reserve new work is refused early with a retryable 503 and every live machine gets
 * `host.unhealthy {reason: disk_low}` once; with the disk completely full, SQLite's writes answer a retryable 503
 * ("out of disk space"), never a 500; once space is freed creates work again.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';

const MiB = 1024 * 1024;

t.test('a full DATA_DIR', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-full-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=32m,mode=0700', 'tmpfs', dir]);
  const rig = await makeMachinesRig({ substrate: new FakeSubstrate(), dir, services: { readyProbe: false, diskReserveBytes: 8 * MiB } });
  t.teardown(async () => {
    await rig.close({ keepDir: true });
    execFileSync('umount', [dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const free = () => {
    const s = fs.statfsSync(dir);
    return s.bavail * s.bsize;
  };
  const { key } = await rig.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'snapshots:write']);
  const a = await rig.call('POST', '/v1/machines', { key, body: { name: 'a' } });
  t.equal(a.status, 201, a.text);
  const id = a.json.id as string;
  t.same(await rig.services.machines.watchPass(), [], 'nothing to report while space is fine');
  const unhealthy = async () =>
    ((await rig.call('GET', `/v1/machines/${id}/events?limit=100`, { key })).json.data as Array<{ type: string; data: any }>).filter((e) => e.type === 'host.unhealthy');
  t.same(await unhealthy(), []);

  // Below the reserve: 4 MiB left.
  const filler = path.join(dir, 'filler');
  fs.writeFileSync(filler, Buffer.alloc(free() - 4 * MiB));
  const b = await rig.call('POST', '/v1/machines', { key, body: { name: 'b' } });
  t.equal(b.status, 503, b.text);
  t.equal(b.json.error.code, 'compute_unavailable');
  t.match(b.json.error.message, /low on disk space/);
  t.equal(b.headers.get('retry-after'), '60');
  const snap = await rig.call('POST', '/v1/snapshots', { key, body: { machine_id: id } });
  t.equal(snap.status, 503, `snapshots too: ${snap.text}`);
  t.equal((await rig.call('GET', `/v1/machines/${id}`, { key })).status, 200, 'reads still work');
  await rig.services.machines.watchPass();
  await rig.services.machines.watchPass();
  t.match(await unhealthy(), [{ type: 'host.unhealthy', data: { reason: 'disk_low' } }], 'host.unhealthy, once');
  t.equal((await unhealthy()).length, 1);

  // Completely full: SQLite cannot grow.
  const top = path.join(dir, 'filler2');
  try {
    fs.writeFileSync(top, Buffer.alloc(free()));
  } catch {
    /* ENOSPC at the very end is the point */
  }
  const statuses = new Set<number>();
  let full: any = null;
  const metadata = Object.fromEntries(Array.from({ length: 63 }, (_, i) => [`k${i}`, `${i}`.repeat(1024 / `${i}`.length | 0).slice(0, 1024)]));
  for (let i = 0; i < 400 && !full; i++) {
    const r = await rig.call('PATCH', `/v1/machines/${id}`, { key, body: { metadata: { ...metadata, n: String(i) } } });
    statuses.add(r.status);
    if (r.status === 503) full = r;
  }
  t.notOk(statuses.has(500), `never a 500 (${[...statuses]})`);
  t.ok(full, 'a write met the full disk');
  t.equal(full.json.error.code, 'compute_unavailable');
  t.equal(full.json.error.message, 'The server is out of disk space; retry later.');
  t.equal(full.headers.get('retry-after'), '60');
  t.ok(rig.logs.some((l) => l.event === 'disk_full'), 'logged for the operator');

  // Space back.
  fs.rmSync(top);
  fs.rmSync(filler);
  const c = await rig.call('POST', '/v1/machines', { key, body: { name: 'c' } });
  t.equal(c.status, 201, c.text);
  t.equal((await rig.call('PATCH', `/v1/machines/${id}`, { key, body: { metadata: { back: 'yes' } } })).status, 200);
});

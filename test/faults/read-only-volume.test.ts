/**
 * A full filesystem under the machines' disk volume (issue 14 item 1, the substrate half), on real podman
 * containers: the container substrate's root is a 640 MiB tmpfs, so its sparse btrfs loop volume (4 GiB apparent)
 * can outgrow the filesystem holding it. A machine writes until the loop device's writes fail and the kernel
 * really aborts a btrfs transaction and forces the volume read-only (no simulation). Then:
 * - while read-only: creates, starts and snapshots answer 503 `compute_unavailable` with Retry-After and no
 *   figures, every live machine gets `host.unhealthy {reason: disk_read_only}` once, nothing is recovered while
 *   the backing filesystem is still full;
 * - space freed: the next watch pass stops the running machine (`machine.stopped {reason: disk_read_only}`),
 *   mounts the volume again and starts it (`machine.started {reason: host_recovered}`); a stopped machine stays
 *   stopped and starts; the file written and acknowledged before the fault is still there; a create works;
 *   one loop device, one volume mount, one container per machine, one writable blob per disk.
 * Needs root, podman, runc, btrfs-progs.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';
import { agentAnswers, blobsIn, eventsOf, podmanOf } from '../helpers/faults.js';
import { until } from '../helpers/machines-rig.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const MiB = 1024 * 1024;
const ACK = '/home/agent/acknowledged.txt';

t.test('a read-only disk volume is recovered once space is back', { timeout: 600_000 }, async (t) => {
  const { rig, substrate, root, created } = await containerMachinesRig(t, '/tmp/cpr-', { readyProbe: false, diskReserveBytes: 64 * MiB }, {}, {
    rootTmpfs: '640m', volumeBytes: 4096 * MiB,
  });
  const { key } = await rig.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'snapshots:write']);
  const disks = path.join(root, 'disks');
  const free = () => {
    const s = fs.statfsSync(root);
    return s.bavail * s.bsize;
  };
  const loopDevices = () => execFileSync('losetup', ['-j', path.join(root, 'disks.btrfs')], { encoding: 'utf8' }).split('\n').filter(Boolean);
  const mountsOf = (target: string) => fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.split(' ')[4] === target);
  t.same(substrate.diskVolume(), { readOnly: false, backingDir: root }, 'a loop volume on the tmpfs');

  const a = await rig.call('POST', '/v1/machines', { key, body: { name: 'writer' } });
  t.equal(a.status, 201, a.text);
  const id = a.json.id as string;
  created.push(id);
  const b = await rig.call('POST', '/v1/machines', { key, body: { name: 'resting', start: false } });
  t.equal(b.status, 201, b.text);
  const idle = b.json.id as string;
  created.push(idle);
  await agentAnswers(rig, key, id);
  const w = await rig.call('PUT', `/v1/machines/${id}/files/content?path=${encodeURIComponent(ACK)}`, { key, body: { content: 'written before the fault' } });
  t.equal(w.status, 200, `the write is acknowledged: ${w.text}`);

  // The backing filesystem nearly full, then the machine writes (and syncs) until the volume cannot take more.
  fs.writeFileSync(path.join(root, 'filler'), Buffer.alloc(Math.max(0, free() - 48 * MiB)));
  const fill = 'i=0; while [ $i -lt 24 ]; do head -c 8388608 /dev/urandom > /var/tmp/fill$i || break; sync || break; i=$((i+1)); done; exit 0';
  await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', fill], timeout_ms: 60_000 } });
  await until('the kernel forces the volume read-only', 60, async () => {
    try {
      execFileSync('sync', ['-f', disks], { stdio: 'ignore' });
    } catch {
      /* EIO: the write errors this drill is after */
    }
    return substrate.diskVolume()?.readOnly ? true : null;
  });
  // The superblock's options (after the separator: type, source, options) say ro; the mount's own still say rw.
  t.ok(mountsOf(disks).some((l) => (l.split(' - ')[1] ?? '').split(' ')[2]?.split(',').includes('ro')), 'the kernel forced it read-only');

  // While read-only, nothing is recovered (the backing filesystem is still full) and new work is refused.
  t.same(await rig.services.machines.watchPass(), [], 'the watch reports no machine moved');
  await rig.services.machines.watchPass();
  t.equal(substrate.diskVolume()?.readOnly, true, 'still read-only while there is no room');
  t.equal((await rig.call('GET', `/v1/machines/${id}`, { key })).json.state, 'running', 'the machine still runs (read-only)');
  const refusals = [
    await rig.call('POST', '/v1/machines', { key, body: { name: 'refused' } }),
    await rig.call('POST', `/v1/machines/${idle}/start`, { key }),
    await rig.call('POST', '/v1/snapshots', { key, body: { machine_id: id } }),
  ];
  for (const r of refusals) {
    t.equal(r.status, 503, r.text);
    t.equal(r.json.error.code, 'compute_unavailable');
    t.match(r.json.error.message, /read-only/);
    t.notMatch(r.json.error.message, /\d/, 'no host figures in the message');
    t.equal(r.headers.get('retry-after'), '30');
  }
  t.equal((await rig.call('GET', `/v1/machines/${idle}`, { key })).json.state, 'stopped', 'the refused start moved nothing');
  for (const m of [id, idle]) {
    t.same((await eventsOf(rig, key, m)).filter((e) => e.type === 'host.unhealthy').map((e) => e.data), [{ reason: 'disk_read_only' }], `host.unhealthy once for ${m}`);
  }

  // Space back: one watch pass recovers the volume.
  fs.rmSync(path.join(root, 'filler'));
  await rig.services.machines.watchPass();
  t.same(substrate.diskVolume(), { readOnly: false, backingDir: root }, 'the volume is writable again');
  t.equal((await rig.call('GET', `/v1/machines/${id}`, { key })).json.state, 'running', 'the machine runs again');
  t.equal((await rig.call('GET', `/v1/machines/${idle}`, { key })).json.state, 'stopped', 'the stopped machine stays stopped');
  const evs = (await eventsOf(rig, key, id)).filter((e) => ['machine.stopped', 'machine.started', 'machine.failed'].includes(e.type));
  t.match(evs.slice(-2), [
    { type: 'machine.stopped', data: { from: 'stopping', to: 'stopped', by: { type: 'system' }, reason: 'disk_read_only' } },
    { type: 'machine.started', data: { from: 'starting', to: 'running', by: { type: 'system' }, reason: 'host_recovered' } },
  ]);
  t.notOk(evs.some((e) => e.type === 'machine.failed'), 'no machine.failed');
  await agentAnswers(rig, key, id);
  const r = await rig.call('GET', `/v1/machines/${id}/files/content?path=${encodeURIComponent(ACK)}&encoding=utf8`, { key });
  t.equal(r.status, 200, r.text);
  t.equal(r.json.content, 'written before the fault', 'the acknowledged write survived');
  const again = await rig.call('PUT', `/v1/machines/${id}/files/content?path=${encodeURIComponent('/home/agent/after.txt')}`, { key, body: { content: 'after' } });
  t.equal(again.status, 200, `the machine writes again: ${again.text}`);

  const c = await rig.call('POST', '/v1/machines', { key, body: { name: 'after' } });
  t.equal(c.status, 201, `a create works: ${c.text}`);
  created.push(c.json.id as string);
  const s = await rig.call('POST', `/v1/machines/${idle}/start`, { key });
  t.equal(s.status, 200, `the resting machine starts: ${s.text}`);
  await agentAnswers(rig, key, idle);
  t.equal((await eventsOf(rig, key, id)).filter((e) => e.type === 'host.unhealthy').length, 1, 'one host.unhealthy for the episode');

  // Nothing leaked: one loop device and one mount for the volume, a container and a writable blob per machine.
  t.equal(loopDevices().length, 1, 'one loop device on the volume file');
  t.equal(mountsOf(disks).length, 1, 'the volume is mounted once');
  const containers = (await podmanOf(substrate, 'ps', '-a', '--format', '{{.Names}}')).split('\n').filter(Boolean).sort();
  t.equal(containers.length, 3, `one container per machine: ${containers}`);
  t.equal(blobsIn(root).length, 3, 'one writable blob per disk, no layer');
  for (const m of created) t.equal(mountsOf(substrate.mergedPath(m)).length, 1, `one overlay for ${m}`);
});

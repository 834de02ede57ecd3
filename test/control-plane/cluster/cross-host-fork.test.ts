/**
 * A snapshot taken on host a, forked on host b (issue 25 item 4, services side; services/layer-pull.ts): two service
 * stacks (the real /v1 app and services each) on one throwaway PostgreSQL, each host its own btrfs layer store and
 * internal listener; host b finds host a's driver through the hosts table (owner-of's host lookup) and pulls the
 * snapshot's chain over the signed channel before the fork's disk is made. The fork's disk on b, mounted, holds the
 * snapshot's files; a second fork on b moves nothing; a template made from it on b and a create from that template
 * move nothing more, and once the template is deleted (through host a) host b's pin sweep lets its copy go; the
 * snapshot records host a. A snapshot of a host that is down is refused 409 naming the lost
 * host, and no machine is recorded. Needs root (mounts).
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createHostCalls } from '../../../control-plane/src/cluster/forward/host-call.js';
import { layerFetch } from '../../../control-plane/src/cluster/layer-fetch.js';
import { ownerOfHost, registeredUrl } from '../../../control-plane/src/cluster/owner-of.js';
import type { HostRegistration } from '../../../control-plane/src/store/repos/hosts.js';
import { DiskSubstrate, HOST_A, HOST_B, layerChannel, PROC_A, PROC_B } from '../../helpers/layer-channel.js';
import { onDisk } from '../../helpers/layer-hosts.js';
import type { LogLine } from '../../../control-plane/src/log.js';
import { makeMachinesRig } from '../../helpers/machines-rig.js';
import { startPostgres } from '../../helpers/postgres.js';

const CAPACITY = { cores: 2, memory_bytes: 25769803776, disk_bytes: 107374182400, machines: { small: 4 } };

t.test('a fork on host b of a snapshot taken on host a holds its files; the second moves nothing', async (t) => {
  const pg = await startPostgres();
  t.teardown(() => pg.stop());
  const url = await pg.createDatabase('cross_host_fork');
  const { root, a, b, forwarder } = await layerChannel(t);
  const mnt = path.join(root, 'mnt');

  const logsB: LogLine[] = [];
  const rigA = await makeMachinesRig({ substrate: new DiskSubstrate(a), databaseUrl: url, services: { hostId: HOST_A, readyProbe: false } });
  t.teardown(() => rigA.close());
  // Host b: layers another host holds come through host calls to the driver the hosts table names.
  const fetch = layerFetch(createHostCalls(forwarder, HOST_B), ownerOfHost({ host: (id) => rigA.store.hosts.get(id) }, { processId: PROC_B, driving: () => true }));
  const rigB = await makeMachinesRig({
    substrate: new DiskSubstrate(b), databaseUrl: url,
    services: { hostId: HOST_B, readyProbe: false, layerPull: { fetch, sink: b.sink }, log: (l) => logsB.push(l) },
  });
  t.teardown(() => rigB.close());
  const reg = (id: string, listener: string, processId: string): HostRegistration => ({ id, region: 'default', capacity: CAPACITY, internalUrl: registeredUrl(listener, processId) });
  await rigA.store.hosts.takeOver(reg(HOST_A, a.address, PROC_A));
  await rigB.store.hosts.takeOver(reg(HOST_B, b.address, PROC_B));

  // On host a: a stopped machine whose disk holds two files, captured.
  const { key } = await rigA.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'snapshots:read', 'snapshots:write', 'templates:read', 'templates:write']);
  const m = await rigA.call('POST', '/v1/machines', { key, body: { name: 'origin', start: false } });
  t.equal(m.status, 201, m.text);
  await onDisk(a.store, DiskSubstrate.diskOf(m.json.id), mnt, (dir) => {
    fs.mkdirSync(path.join(dir, 'home'));
    fs.writeFileSync(path.join(dir, 'home', 'note.txt'), 'written on host a\n');
    fs.writeFileSync(path.join(dir, 'home', 'data.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
  });
  const snap = await rigA.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: m.json.id, name: 'on a' } });
  t.equal(snap.status, 201, snap.text);
  const row = await rigA.store.snapshots.byId(snap.json.id);
  t.equal(row?.host_id, HOST_A, 'the snapshot records the host holding its layers');
  t.notOk(b.store.hasLayer(row!.layer_id!), 'host b does not hold it yet');

  // Forked through host b's stack: the chain is pulled first, then the disk made on it there.
  const f1 = await rigB.call('POST', `/v1/machines/${m.json.id}/fork`, { key, body: { name: 'fork-one', snapshot_id: snap.json.id } });
  t.equal(f1.status, 201, f1.text);
  t.same(b.store.layer(row!.layer_id!).pins, [snap.json.id], 'cached on host b, pinned by the snapshot');
  await onDisk(b.store, DiskSubstrate.diskOf(f1.json.id), mnt, (dir) => {
    t.equal(fs.readFileSync(path.join(dir, 'home', 'note.txt'), 'utf8'), 'written on host a\n', "the fork's disk on host b holds the snapshot's file");
    t.ok(fs.readFileSync(path.join(dir, 'home', 'data.bin')).equals(Buffer.alloc(3 * 1024 * 1024, 7)), 'and the 3 MiB one, byte for byte');
  });
  const exports = () => a.logs.filter((l) => l.event === 'layer_export').length;
  t.equal(exports(), 1, 'host a exported the chain once');
  const pulled = logsB.filter((l) => l.event === 'layer_pulled');
  t.same(pulled.map((l) => [l.layer, l.from_host, l.holder, l.layers]), [[row!.layer_id, HOST_A, snap.json.id, 1]], 'one pull, logged');
  const progress = logsB.filter((l) => l.event === 'layer_pull');
  t.same(progress[progress.length - 1] && [progress[progress.length - 1]!.done === progress[progress.length - 1]!.total], [true], 'progress to the total');

  // A second fork on host b: nothing moves, nothing is asked of host a.
  const f2 = await rigB.call('POST', `/v1/machines/${m.json.id}/fork`, { key, body: { name: 'fork-two', snapshot_id: snap.json.id } });
  t.equal(f2.status, 201, f2.text);
  t.equal(exports(), 1, 'the second fork moved nothing');
  t.equal(logsB.filter((l) => l.event === 'layer_pulled').length, 1);
  await onDisk(b.store, DiskSubstrate.diskOf(f2.json.id), mnt, (dir) => t.equal(fs.readFileSync(path.join(dir, 'home', 'note.txt'), 'utf8'), 'written on host a\n'));

  // A template made from it through host b: its pin is taken on b (the copy there), nothing moves; a create from it
  // on b stands on that copy.
  const tpl = await rigB.call('POST', '/v1/templates?wait=true', { key, body: { name: 'from-a', snapshot_id: snap.json.id } });
  t.equal(tpl.status, 201, tpl.text);
  t.same([(await rigB.store.templates.byId(tpl.json.id))?.host_id, [...b.store.layer(row!.layer_id!).pins].sort()], [HOST_B, [snap.json.id, tpl.json.id].sort()], 'the template is held on host b');
  const fromTpl = await rigB.call('POST', '/v1/machines', { key, body: { name: 'from-template', template: tpl.json.id, start: false } });
  t.equal(fromTpl.status, 201, fromTpl.text);
  await onDisk(b.store, DiskSubstrate.diskOf(fromTpl.json.id), mnt, (dir) => t.equal(fs.readFileSync(path.join(dir, 'home', 'note.txt'), 'utf8'), 'written on host a\n'));
  t.equal(exports(), 1, 'still one export');
  // Deleted through host a's process: host b's copy keeps the template's pin until b's pin sweep (its host job's,
  // every few minutes) finds the template gone; the snapshot's own pin stays (it is still ready).
  const del = await rigA.call('DELETE', `/v1/templates/${tpl.json.id}`, { key });
  t.equal(del.status, 204, del.text);
  t.same([...b.store.layer(row!.layer_id!).pins].sort(), [snap.json.id, tpl.json.id].sort(), 'not released by another host');
  t.equal(await rigB.services.snapshots.sweepPins(), 1, "host b's sweep releases one pin");
  t.same(b.store.layer(row!.layer_id!).pins, [snap.json.id], "the template's pin is gone from host b");

  // Host a goes down with a snapshot only it holds: a fork on b is refused, naming the lost host; nothing recorded.
  const snap2 = await rigA.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: m.json.id, name: 'second on a' } });
  t.equal(snap2.status, 201, snap2.text);
  t.ok(await rigA.store.hosts.markDown((await rigA.store.hosts.get(HOST_A))!), 'host a is down');
  const before = (await rigB.call('GET', '/v1/machines', { key })).json.data.length;
  const lost = await rigB.call('POST', `/v1/machines/${m.json.id}/fork`, { key, body: { name: 'fork-three', snapshot_id: snap2.json.id } });
  t.same([lost.status, lost.json.error.code, /host that is down \(host_lost\)/.test(lost.json.error.message)], [409, 'conflict', true], 'a lost host: 409, said so');
  t.equal((await rigB.call('GET', '/v1/machines', { key })).json.data.length, before, 'no machine recorded');
  // The snapshot copied before still serves on host b while host a is down.
  const f4 = await rigB.call('POST', `/v1/machines/${m.json.id}/fork`, { key, body: { name: 'fork-four', snapshot_id: snap.json.id } });
  t.equal(f4.status, 201, 'the cached copy serves while its source host is down');
});

/**
 * Host-to-host calls on the internal channel (cluster/forward/host-call.ts, the listener's host handlers,
 * internal-layers.ts) and the services' layer pull (services/layer-pull.ts), with two real listeners and two btrfs
 * layer stores in this process (issue 25 item 4): a layer chain captured on host a is pulled into host b over the
 * signed channel and a disk on it there holds a's files; a second pull moves nothing; a request not signed, or
 * signed for a tenant, never reaches the layer routes; a host call never reaches the tenant handlers; a host that is
 * down is the lost-host conflict, one that cannot be reached a retryable 503. Needs root (mounts).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { AppError } from '../../../shared/errors.js';
import { signRequest } from '../../../control-plane/src/cluster/forward/signature.js';
import { readTransfer } from '../../../control-plane/src/substrate/disks/transfer/sink.js';
import { call, KEY, TENANT } from '../../helpers/forward-rig.js';
import { HOST_A, HOST_B, layerChannel, PROC_A, PROC_B } from '../../helpers/layer-channel.js';
import { onDisk } from '../../helpers/layer-hosts.js';


const envelope = (body: Buffer) => (JSON.parse(body.toString()) as { error: { code: string; message: string } }).error;

t.test('a layer chain moves from host a to host b over the signed channel, once', async (t) => {
  const { root, a, b, puller, fetch, owners, states, pullLogs } = await layerChannel(t);
  const mnt = path.join(root, 'mnt');

  // Host a: a machine writes, is captured stopped (l1), writes again, captured again (l2 on l1).
  await a.store.newDisk({ id: 'disk-m1', base: a.base, top: null, sizeBytes: 64 * 1024 * 1024 });
  await onDisk(a.store, 'disk-m1', mnt, (m) => fs.writeFileSync(path.join(m, 'first.txt'), 'first, on host a\n'));
  const l1 = await a.store.freeze('disk-m1', 'snp_1');
  await onDisk(a.store, 'disk-m1', mnt, (m) => fs.writeFileSync(path.join(m, 'second.txt'), 'second, on host a\n'));
  const l2 = await a.store.freeze('disk-m1', 'snp_2');

  const first = await puller.bring({ layerId: l2.id, hostId: HOST_A }, 'snp_2');
  t.equal(first.kind, 'pulled');
  t.same(first.kind === 'pulled' ? first.layers : null, 2, 'both layers of the chain moved');
  t.same(b.store.layerChain(l2.id), [l2.id, l1.id], 'host b holds the chain');
  t.same(b.store.layer(l2.id).pins, ['snp_2'], 'pinned on host b by the holder');
  t.same(a.logs.filter((l) => l.event === 'layer_export').map((l) => [l.layer, l.to_host, l.frames]), [[l2.id, HOST_B, 2]], 'host a exported once, to host b');
  const progress = pullLogs.filter((l) => l.event === 'layer_pull');
  t.ok(progress.length >= 2, 'progress lines');
  t.equal(progress[progress.length - 1]!.done, progress[progress.length - 1]!.total, 'progress reached the total');

  await b.store.newDisk({ id: 'disk-f1', base: b.base, top: l2.id, sizeBytes: 64 * 1024 * 1024 });
  await onDisk(b.store, 'disk-f1', mnt, (m) => {
    t.equal(fs.readFileSync(path.join(m, 'first.txt'), 'utf8'), 'first, on host a\n', "a disk on host b reads the first layer's file");
    t.equal(fs.readFileSync(path.join(m, 'second.txt'), 'utf8'), 'second, on host a\n', "and the second's");
  });

  // A second pull: the copy is here, nothing is asked of host a, the new holder pins it.
  t.same(await puller.bring({ layerId: l2.id, hostId: HOST_A }, 'tpl_1'), { kind: 'cached' });
  t.same([...b.store.layer(l2.id).pins].sort(), ['snp_2', 'tpl_1']);
  t.equal(a.logs.filter((l) => l.event === 'layer_export').length, 1, 'host a was not asked again');
  // And over the channel, with what b holds named: the body is the header alone.
  const again = await readTransfer(await fetch.body(HOST_A, l2.id, b.sink.have(await fetch.chain(HOST_A, l2.id))));
  t.same(again.header.frames, [], 'nothing to send the second time');
  await again.payload.close();

  // Local layers never move.
  t.same(await puller.bring({ layerId: 'blb_00', hostId: HOST_B }, 'snp_x'), { kind: 'local' });
  t.same(await puller.bring({ layerId: 'blb_00', hostId: null }, 'snp_x'), { kind: 'local' });

  // A layer host a does not hold (released there): 409, a retry cannot help.
  const gone = await puller.bring({ layerId: 'blb_0badc0de', hostId: HOST_A }, 'snp_9').catch((e: unknown) => e);
  t.same(gone instanceof AppError ? [gone.status, gone.message] : null, [409, "The snapshot's disk is no longer on the host that held it, so it cannot be copied here."]);

  // A chain b lacks, from a host that is down: the lost-host conflict, nothing registered.
  await onDisk(a.store, 'disk-m1', mnt, (m) => fs.writeFileSync(path.join(m, 'third.txt'), 'third\n'));
  const l3 = await a.store.freeze('disk-m1', 'snp_3');
  owners.delete(HOST_A);
  states.set(HOST_A, 'down');
  const lost = await puller.bring({ layerId: l3.id, hostId: HOST_A }, 'snp_3').catch((e: unknown) => e);
  t.ok(lost instanceof AppError);
  t.same(lost instanceof AppError ? [lost.status, lost.code, /host that is down/.test(lost.message)] : null, [409, 'conflict', true], 'down: 409 naming the lost host');
  // Up by its row but not reachable (a listener that went away): retryable.
  states.set(HOST_A, 'active');
  owners.set(HOST_A, { kind: 'remote', processId: PROC_A, address: 'http://127.0.0.1:9' });
  const away = await puller.bring({ layerId: l3.id, hostId: HOST_A }, 'snp_3').catch((e: unknown) => e);
  t.same(away instanceof AppError ? [away.status, away.code, away.headers?.['retry-after']] : null, [503, 'compute_unavailable', '2'], 'unreachable: 503 with Retry-After');
  t.notOk(b.store.hasLayer(l3.id), 'nothing registered on host b');
  t.same([...a.tenantServed, ...b.tenantServed], [], 'no host call reached a tenant handler');
});

t.test('only host calls reach the layer routes, and host calls reach nothing else', async (t) => {
  const { a } = await layerChannel(t);
  const port = Number(new URL(a.address).port);
  const path1 = '/internal/layers/blb_0123';
  const host = { on_behalf_of: { kind: 'host' as const, host_id: HOST_B }, request_id: 'req_h1' };
  const signed = (assertion: typeof TENANT | typeof host, p = path1, method = 'GET') =>
    signRequest(KEY, { method, path: p, sender: PROC_B, target: PROC_A, assertion, now: Date.now() });

  const unsigned = await call(port, { path: path1 });
  t.same([unsigned.status, envelope(unsigned.body).code], [401, 'unauthenticated'], 'unsigned: 401');

  const tenant = await call(port, { path: path1, headers: signed(TENANT) });
  t.same([tenant.status, tenant.body.toString()], [299, 'tenant handler'], "a tenant's request goes to the tenant handlers");
  t.same(a.tenantServed.map((s) => [s.url, s.f.on_behalf_of.kind]), [[path1, 'tenant']]);
  t.same(a.logs.filter((l) => String(l.event).startsWith('layer_')), [], 'the layer routes never saw it');

  const unknownLayer = await call(port, { path: path1, headers: signed(host) });
  t.same([unknownLayer.status, envelope(unknownLayer.body).code, envelope(unknownLayer.body).message], [404, 'not_found', 'layer not found'], 'a layer not held: 404');

  const api = await call(port, { path: '/v1/machines', headers: signed(host, '/v1/machines') });
  t.same([api.status, envelope(api.body).message], [404, 'No such internal route.'], 'a host call to a tenant path: 404, not the API');
  const post = await call(port, { method: 'POST', path: path1, headers: signed(host, path1, 'POST') });
  t.equal(post.status, 404, 'only GET');
  const badHave = await call(port, { path: `${path1}?have=../etc`, headers: signed(host, `${path1}?have=../etc`) });
  t.same([badHave.status, envelope(badHave.body).code], [400, 'invalid_request'], 'a have that is not layer ids: 400');
  t.equal(a.tenantServed.length, 1, 'no host call reached the tenant handlers');

  // An upgrade with a host assertion is refused, never handed to the gateway's handler.
  const up = await call(port, { path: path1, headers: { ...signed(host), connection: 'Upgrade', upgrade: 'websocket' } });
  t.equal(up.status, 404, 'a host call upgrade: refused');
  t.equal(a.tenantServed.length, 1);
});

/**
 * Issue 21 item 1: what guest root must reach lives outside the substrate root (reach.ts). Guest root is an
 * unprivileged host uid; a substrate root inside a 0700 DATA_DIR (what `npm start` makes) or under a 0700
 * checkout used to fail every start (`runc create failed … mount …/merged: permission denied`).
 * - a root under a 0700 directory starts a machine whose agent answers;
 * - a machine made before (mount point and channel under the root, its container made with those paths) is
 *   moved at its next start and keeps its disk; so is one whose reach directory was removed by hand;
 * - a host where guest root cannot pass a directory above the reach dir is told which one;
 * - the reach dir is one per root path, outside it.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { createArgs, globalArgs } from '../../control-plane/src/substrate/container/podman-argv.js';
import { ancestry, assertGuestReaches, enterAs, reachDirFor } from '../../control-plane/src/substrate/container/reach.js';
import { isMounted } from '../../control-plane/src/substrate/disks/overlay-backend.js';
import { podmanOf } from '../helpers/faults.js';
import { H2Client } from '../helpers/h2-client.js';
import { testImage, waitForAgent } from '../helpers/substrate-image.js';

const res = { vcpu: 1, memory_mb: 1024, disk_gb: 2 };
const READY_MS = 180_000;
const NOBODY = 65534;

async function exec(c: H2Client, command: string[]): Promise<{ stdout: string; exit_code: number }> {
  const r = await c.request('POST', '/exec', { command });
  if (r.status !== 200) throw new Error(`exec status ${r.status}: ${r.body.toString()}`);
  return r.json();
}

t.test('the reach dir: one per root path, outside it', async (t) => {
  t.equal(reachDirFor('/srv/computer/data/substrate'), '/var/lib/computer/containers/3809a879bf88');
  t.equal(reachDirFor('/srv/other/substrate'), '/var/lib/computer/containers/cddfcab6c254');
  t.equal(reachDirFor('/srv/other/substrate', '/x/reach'), '/x/reach/cddfcab6c254');
  t.same(ancestry('/var/lib/computer/containers/ab'), ['/', '/var', '/var/lib', '/var/lib/computer', '/var/lib/computer/containers', '/var/lib/computer/containers/ab']);
});

t.test('the start check names the directory guest root cannot pass', async (t) => {
  const top = fs.mkdtempSync('/tmp/fresh-clone-chk-'); // 0700, as mkdtemp makes it
  t.teardown(() => fs.rmSync(top, { recursive: true, force: true }));
  const reach = path.join(top, 'a', 'b');
  fs.mkdirSync(reach, { recursive: true, mode: 0o711 });
  fs.chmodSync(path.join(top, 'a'), 0o711);
  fs.chmodSync(reach, 0o711);
  t.equal(enterAs(ancestry(reach), NOBODY, NOBODY), top, 'a real shell as another uid stops at the 0700 directory');
  t.throws(() => assertGuestReaches(reach, NOBODY), {
    message:
      `container substrate: guest root runs as host uid 65534, which cannot enter ${top}, so no machine could start ` +
      `(runc mounts each machine's root and channel under ${reach}); let other users pass through it (chmod o+x ${top}), keeping it unreadable to them`,
  });
  fs.chmodSync(top, 0o711);
  t.doesNotThrow(() => assertGuestReaches(reach, NOBODY), 'passes once the directory lets others through');
});

t.setTimeout(900_000);
t.test('a substrate root inside a 0700 data directory', { timeout: 900_000 }, async (t) => {
  const image = await testImage('container');
  const top = fs.mkdtempSync('/tmp/fresh-clone-'); // 0700: a checkout under /root, or mktemp -d
  const data = path.join(top, 'data');
  fs.mkdirSync(data, { mode: 0o700 }); // what `npm start` makes
  const root = path.join(data, 'substrate');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, disks: 'copy' });
  const clients: H2Client[] = [];
  const ids = ['mch_reach1', 'mch_reach2'];
  t.teardown(async () => {
    for (const c of clients) c.session.destroy();
    for (const id of ids) await sub.destroy(id).catch(() => {});
    await sub.releaseMounts();
    fs.rmSync(top, { recursive: true, force: true });
    fs.rmSync(sub.env.runDir!, { recursive: true, force: true });
  });
  t.equal(fs.statSync(data).mode & 0o777, 0o700, 'DATA_DIR stays 0700');
  t.equal(sub.reachDir, reachDirFor(root));

  await t.test('a new machine starts', async (t) => {
    const key = crypto.randomBytes(24).toString('hex');
    await sub.create({ id: 'mch_reach1', resources: res, source: { kind: 'base' } });
    t.equal(await sub.status('mch_reach1'), 'running');
    t.equal(sub.channelPath('mch_reach1'), path.join(sub.reachDir, 'mch_reach1', 'channel', 'agent.sock'));
    t.equal(sub.mergedPath('mch_reach1'), path.join(sub.reachDir, 'mch_reach1', 'merged'));
    const a = await waitForAgent(sub, 'mch_reach1', key, READY_MS);
    clients.push(a.client);
    t.equal(a.health.ok, true, 'its agent answers');
    t.same(fs.readdirSync(path.join(root, 'machines', 'mch_reach1')), ['machine.json'], 'the record stays in the root');
  });

  await t.test('a machine made before is moved at its next start', async (t) => {
    const key = crypto.randomBytes(24).toString('hex');
    await sub.create({ id: 'mch_reach2', resources: res, source: { kind: 'base' } });
    const a = await waitForAgent(sub, 'mch_reach2', key, READY_MS);
    t.equal((await exec(a.client, ['sh', '-c', 'echo kept > /home/agent/kept.txt'])).exit_code, 0);
    a.client.session.destroy();
    await sub.stop('mch_reach2');
    // The layout before: mount point and channel under the root, the container made with those paths, no place.
    const recFile = path.join(root, 'machines', 'mch_reach2', 'machine.json');
    const rec = JSON.parse(fs.readFileSync(recFile, 'utf8'));
    delete rec.place;
    fs.writeFileSync(recFile, JSON.stringify(rec));
    const old = path.join(root, 'machines', 'mch_reach2');
    fs.mkdirSync(path.join(old, 'merged'));
    fs.mkdirSync(path.join(old, 'channel'), { mode: 0o700 });
    fs.chownSync(path.join(old, 'channel'), sub.uidBase!, sub.uidBase!);
    fs.rmSync(path.join(sub.reachDir, 'mch_reach2'), { recursive: true });
    await podmanOf(sub, 'rm', '--force', 'computer-mch_reach2');
    const args = createArgs(sub.env, {
      id: 'mch_reach2', resources: res, rootfs: path.join(old, 'merged'), channelDir: path.join(old, 'channel'), network: 'none', uidBase: sub.uidBase!, hostname: 'computer',
    });
    await podmanOf(sub, ...args.slice(globalArgs(sub.env).length));
    t.equal(sub.channelPath('mch_reach2'), path.join(old, 'channel', 'agent.sock'), 'until it moves, its channel is where it was');

    await sub.start('mch_reach2');
    t.equal(JSON.parse(fs.readFileSync(recFile, 'utf8')).place, 'reach');
    t.same(fs.readdirSync(old), ['machine.json'], 'nothing of it left under the root but its record');
    t.equal(sub.channelPath('mch_reach2'), path.join(sub.reachDir, 'mch_reach2', 'channel', 'agent.sock'));
    t.ok(isMounted(path.join(sub.reachDir, 'mch_reach2', 'merged')));
    const b = await waitForAgent(sub, 'mch_reach2', key, READY_MS);
    clients.push(b.client);
    t.equal((await exec(b.client, ['cat', '/home/agent/kept.txt'])).stdout, 'kept\n', 'its disk came along');
  });

  await t.test('a machine whose reach directory was removed by hand gets it back at its start', async (t) => {
    const key = crypto.randomBytes(24).toString('hex');
    await sub.stop('mch_reach2');
    fs.rmSync(path.join(sub.reachDir, 'mch_reach2'), { recursive: true });
    await sub.start('mch_reach2');
    t.equal(sub.channelPath('mch_reach2'), path.join(sub.reachDir, 'mch_reach2', 'channel', 'agent.sock'));
    const b = await waitForAgent(sub, 'mch_reach2', key, READY_MS);
    clients.push(b.client);
    t.equal((await exec(b.client, ['cat', '/home/agent/kept.txt'])).stdout, 'kept\n');
  });

  await t.test('destroy and release leave nothing in the reach dir', async (t) => {
    for (const id of ids) await sub.destroy(id);
    t.same(fs.readdirSync(sub.reachDir), []);
    await sub.releaseMounts();
    t.notOk(fs.existsSync(sub.reachDir));
  });
});

/**
 * Control-plane restarts on real podman containers:
 * - item 6: running machines answer before the guest image is checked (the substrate is not ready, its
 *   preparation never finishes here): the agent channel is reached through its known socket path; without that
 *   path the same call is the old 503 "still preparing";
 * - item 8: a simulated host reboot (every container and overlay mount gone): the reconciler starts again the
 *   machine the user left running (`machine.started {reason: host_restart}`, the agent answers); one that cannot be
 *   started rests `stopped` with `machine.stopped {reason: host_restart, restarted: false, code}` and starts
 *   once the fault is gone.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { DeferredSubstrate } from '../../control-plane/src/machine-host.js';
import { containerEarlyChannel } from '../../control-plane/src/substrate/container/driver.js';
import { unmount } from '../../control-plane/src/substrate/disks/overlay-backend.js';
import { containerName } from '../../control-plane/src/substrate/container/podman-argv.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { agentAnswers, eventsOf, podmanOf, podmanState, restartableContainerRig } from '../helpers/faults.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

t.test('control-plane restarts', { timeout: 900_000 }, async (t) => {
  const cp = await restartableContainerRig(t);
  const { key } = await cp.rig.tenant();
  const make = async (name: string) => {
    const c = await cp.rig.call('POST', '/v1/machines', { key, body: { name } });
    t.equal(c.status, 201, c.text);
    return c.json.id as string;
  };
  const keep = await make('keep');
  const broken = await make('broken');
  await agentAnswers(cp.rig, key, keep);

  await t.test('running machines answer while the substrate is still preparing', async (t) => {
    await cp.rig.close({ keepDir: true });
    const never = () => new Promise<never>(() => {});
    for (const early of [true, false]) {
      const deferred = new DeferredSubstrate('container', never, early ? containerEarlyChannel(cp.root) : undefined);
      const rig = await makeMachinesRig({ substrate: deferred, dir: cp.dir, services: { readyProbe: false } });
      const r = await rig.call('POST', `/v1/machines/${keep}/exec`, { key, body: { command: ['echo', 'early'] } });
      if (early) {
        t.equal(r.status, 200, r.text);
        t.equal(r.json.stdout, 'early\n');
      } else {
        t.equal(r.status, 503, 'without the socket path: unreachable until the image is checked');
      }
      await rig.close({ keepDir: true });
    }
    await cp.restart();
  });

  await t.test('a host reboot: the machine left running is started again', async (t) => {
    // The reboot: containers and overlay mounts gone. `broken` also gets a fault that fails its start (its
    // overlay's mount point is a file now).
    for (const id of [keep, broken]) {
      await podmanOf(cp.substrate, 'rm', '--force', '--time', '0', containerName(id));
      await unmount(cp.substrate.mergedPath(id));
    }
    const merged = cp.substrate.mergedPath(broken);
    fs.rmSync(merged, { recursive: true, force: true });
    fs.writeFileSync(merged, 'not a directory');
    await cp.restart();
    const moved = await cp.rig.services.machines.reconcile();
    t.same(new Map(moved.map((m) => [m.id, m.to])), new Map([[keep, 'running'], [broken, 'stopped']]));
    t.match((await eventsOf(cp.rig, key, keep)).at(-1), { type: 'machine.started', data: { to: 'running', reason: 'host_restart' } });
    t.equal(await podmanState(cp.substrate, keep), 'running');
    await agentAnswers(cp.rig, key, keep);
    t.match((await eventsOf(cp.rig, key, broken)).at(-1), {
      type: 'machine.stopped', data: { to: 'stopped', reason: 'host_restart', restarted: false, code: 'internal_error' },
    });
    fs.rmSync(merged);
    fs.mkdirSync(merged);
    const s = await cp.rig.call('POST', `/v1/machines/${broken}/start`, { key });
    t.equal(s.status, 200, `startable once the fault is gone: ${s.text}`);
  });
});

/**
 * Issue 22 item 5: the control plane killed while a live container capture holds the machine frozen (cgroup
 * freezer), on a real podman container. A child control plane is SIGKILLed at `container.capture.frozen`
 * (between the freeze and the thaw) inside a snapshot and inside a fork; it leaves the container frozen with
 * the freeze in the machine's record, and the next control plane thaws it as it starts: the machine answers
 * without anyone restarting it, and the reconciler settles the capture (`error`, no blob). The substrate watch
 * thaws a machine found frozen with no capture in flight (a freeze nobody recorded). Both disk modes.
 */
import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { agentAnswers, blobsIn, eventsOf, restartableContainerRig } from '../helpers/faults.js';
import { until } from '../helpers/machines-rig.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

/** The machine's record in the substrate root (what the substrate wrote to its machine.json). */
function recordOf(root: string, id: string): { ctrId: string; frozen?: unknown } {
  return JSON.parse(fs.readFileSync(path.join(root, 'machines', id, 'machine.json'), 'utf8')) as { ctrId: string; frozen?: unknown };
}

/** The container's cgroup v1 freezer state file. */
function freezerState(root: string, id: string): string {
  return `/sys/fs/cgroup/freezer/libpod_parent/libpod-${recordOf(root, id).ctrId}/freezer.state`;
}

const stateOf = (root: string, id: string) => fs.readFileSync(freezerState(root, id), 'utf8').trim();

/** Whatever a subtest asserted, the machine is not left frozen for the next one or the teardown's podman rm. */
function thawAfter(t: Test, root: string, id: string): void {
  t.teardown(() => {
    try {
      fs.writeFileSync(freezerState(root, id), 'THAWED');
    } catch {
      /* stopped: nothing to thaw */
    }
  });
}

async function drill(t: Test, disks: 'auto' | 'copy'): Promise<void> {
  const cp = await restartableContainerRig(t, { disks });
  t.equal(cp.substrate.diskMode, disks === 'auto' ? 'snapshot' : 'copy');
  const { key } = await cp.rig.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write']);
  const made = await cp.rig.call('POST', '/v1/machines', { key, body: { name: 'frozen' } });
  t.equal(made.status, 201, made.text);
  const id = made.json.id as string;
  await agentAnswers(cp.rig, key, id);
  const exec = (command: string[]) => cp.rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command } });
  t.equal((await exec(['sh', '-c', 'echo before > /home/agent/mark.txt'])).json.exit_code, 0);
  t.ok(fs.existsSync(freezerState(cp.root, id)), 'the container has a cgroup v1 freezer (this host\'s layout)');

  /** Left by the dead control plane: frozen, and the freeze recorded. */
  const leftFrozen = (t: Test) => () => {
    t.equal(stateOf(cp.root, id), 'FROZEN', 'the killed control plane left the container frozen');
    t.match(recordOf(cp.root, id).frozen, { how: 'cgroup' }, 'with the freeze in its record');
  };

  /** The new control plane thawed it when it started: nothing else ran (no reconciler, no watch). */
  const thawedAtStart = async (t: Test) => {
    t.equal(stateOf(cp.root, id), 'THAWED', 'thawed by the new control plane as it started');
    t.notOk('frozen' in recordOf(cp.root, id), 'the freeze is cleared from the record');
    t.equal((await cp.rig.call('GET', `/v1/machines/${id}`, { key })).json.state, 'running');
    // A few tries: the guest's init may restart an agent whose heartbeat went stale while it was frozen.
    await agentAnswers(cp.rig, key, id, 30);
    t.equal((await exec(['cat', '/home/agent/mark.txt'])).json.stdout, 'before\n', 'the machine answers, its files as they were');
  };

  await t.test('inside a snapshot: thawed at start, the snapshot settles error, no blob', async (t) => {
    thawAfter(t, cp.root, id);
    const before = blobsIn(cp.root);
    const { signal } = await cp.crashAt('container.capture.frozen', key, 'POST', '/v1/snapshots?wait=true', { machine_id: id }, leftFrozen(t));
    t.equal(signal, 'SIGKILL', 'the control plane died at the point');
    await thawedAtStart(t);
    await cp.rig.services.machines.reconcile();
    const snaps = (await cp.rig.call('GET', `/v1/snapshots?machine_id=${id}`, { key })).json.data as Array<{ id: string; state: string }>;
    t.same(snaps.map((s) => s.state), ['error'], 'the interrupted capture is settled error');
    t.match((await eventsOf(cp.rig, key, id)).filter((e) => e.type.startsWith('snapshot.')).at(-1), {
      type: 'snapshot.failed', data: { snapshot_id: snaps[0]!.id, reconciled: true },
    });
    t.same(blobsIn(cp.root), before, 'no blob was left');
    t.equal(stateOf(cp.root, id), 'THAWED');
  });

  await t.test('inside a fork: thawed at start, the fork settles, the machine runs on', async (t) => {
    thawAfter(t, cp.root, id);
    const { signal } = await cp.crashAt('container.capture.frozen', key, 'POST', `/v1/machines/${id}/fork`, { name: 'frozen-fork' }, leftFrozen(t));
    t.equal(signal, 'SIGKILL');
    await thawedAtStart(t);
    await cp.rig.services.machines.reconcile();
    const fork = ((await cp.rig.call('GET', '/v1/machines', { key })).json.data as Array<{ id: string; name: string; state: string }>).find((m) => m.name === 'frozen-fork');
    t.equal(fork?.state, 'error', 'the interrupted fork is error (its create did not complete)');
    t.equal((await cp.rig.call('DELETE', `/v1/machines/${fork!.id}`, { key })).status, 204, 'and can be deleted');
    t.equal(stateOf(cp.root, id), 'THAWED');
  });

  await t.test('the watch thaws a machine frozen with no capture in flight', async (t) => {
    thawAfter(t, cp.root, id);
    // Frozen from outside, with nothing recorded (what no start-up thaw can know about).
    fs.writeFileSync(freezerState(cp.root, id), 'FROZEN');
    // The kernel reports FREEZING until every task has stopped.
    await until('the freeze', 120, async () => (stateOf(cp.root, id) === 'FROZEN' ? true : null));
    t.equal((await exec(['true'])).status, 503, 'a frozen machine answers nothing');
    t.same(await cp.rig.services.machines.watchPass(), [], 'no machine moved');
    t.equal(stateOf(cp.root, id), 'THAWED', 'the watch thawed it');
    t.equal((await cp.rig.call('GET', `/v1/machines/${id}`, { key })).json.state, 'running');
    await agentAnswers(cp.rig, key, id, 30);
    t.equal((await exec(['cat', '/home/agent/mark.txt'])).json.stdout, 'before\n');
  });

  await t.test('a capture after all this works, live, and leaves the machine thawed', async (t) => {
    const snap = await cp.rig.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: id } });
    t.equal(snap.status, 201, snap.text);
    t.equal(snap.json.state, 'ready');
    t.equal(stateOf(cp.root, id), 'THAWED');
    t.notOk('frozen' in recordOf(cp.root, id));
    t.same(await cp.rig.services.machines.watchPass(), []);
    t.equal((await exec(['true'])).json.exit_code, 0);
  });
}

// Both ways a live capture duplicates the disk: a btrfs snapshot (the default), and a copy (`disks: 'copy'`,
// where the machine stays frozen for the whole copy).
for (const disks of ['auto', 'copy'] as const) {
  t.test(`crashes while a live capture holds the machine frozen (disks: ${disks})`, { timeout: 900_000 }, (t) => drill(t, disks));
}

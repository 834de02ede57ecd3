/**
 * The control plane killed (SIGKILL, a child process at a named fault point) inside a snapshot capture, on a
 * real podman container (issue 14: kill -9 inside create, delete and capture). After a restart and the
 * reconciler:
 * - killed after the substrate captured the disk and before the record said so: the snapshot is `ready`
 *   (`snapshot.completed {reconciled: true}`) on the layer the capture made, and a fork from it holds the file
 *   written before the capture (the layer is real, not just a row);
 * - killed after the decision and before the substrate acted: the snapshot is `error` (`snapshot.failed
 *   {reconciled: true}`), no blob was left, and it can be deleted;
 * and the machine kept running throughout and answers.
 *
 * On PostgreSQL (test/postgres/capture-crash.test.ts runs this file with COMPUTER_TEST_ENGINE=postgres; the crash
 * child opens the same database, helpers/rig-db.ts) the first case runs: the record of the outcome is what the store
 * must get right. The kill before the substrate acted stays SQLite-only: its pending record is written by the same
 * decide-and-record code whose crash create-delete-crash.test.ts already drills on PostgreSQL, and the case costs
 * as much as the other.
 */
import t from 'tap';
import { agentAnswers, blobsIn, eventsOf, restartableContainerRig } from '../helpers/faults.js';
import { displayUp } from '../helpers/machines-rig.js';
import { TEST_ENGINE } from '../helpers/rig-db.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

t.test('crashes inside a capture', { timeout: 900_000 }, async (t) => {
  const cp = await restartableContainerRig(t);
  const { key } = await cp.rig.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write']);
  const made = await cp.rig.call('POST', '/v1/machines', { key, body: { name: 'cap' } });
  t.equal(made.status, 201, made.text);
  const id = made.json.id as string;
  await agentAnswers(cp.rig, key, id);
  const exec = (mid: string, command: string[]) => cp.rig.call('POST', `/v1/machines/${mid}/exec`, { key, body: { command } });
  t.equal((await exec(id, ['sh', '-c', 'echo captured > /home/agent/mark.txt && sync'])).json.exit_code, 0);
  const snapshotsOf = async () => (await cp.rig.call('GET', `/v1/snapshots?machine_id=${id}`, { key })).json.data as Array<{ id: string; state: string }>;

  await t.test('killed after the substrate captured, before the record: ready on its layer', async (t) => {
    const { signal } = await cp.crashAt('snapshots.capture.after_substrate', key, 'POST', '/v1/snapshots?wait=true', { machine_id: id });
    t.equal(signal, 'SIGKILL', 'the control plane died at the point');
    const [snap] = await snapshotsOf();
    t.equal(snap!.state, 'pending', 'the record still says pending');
    await cp.rig.services.machines.reconcile();
    const settled = await cp.rig.call('GET', `/v1/snapshots/${snap!.id}`, { key });
    t.equal(settled.json.state, 'ready');
    t.match((await eventsOf(cp.rig, key, id)).filter((e) => e.type.startsWith('snapshot.')).at(-1), {
      type: 'snapshot.completed', data: { snapshot_id: snap!.id, reconciled: true },
    });
    const fork = await cp.rig.call('POST', `/v1/machines/${id}/fork`, { key, body: { snapshot_id: snap!.id, name: 'from-reconciled' } });
    t.equal(fork.status, 201, fork.text);
    await displayUp(cp.rig, key, fork.json.id);
    t.equal((await exec(fork.json.id, ['cat', '/home/agent/mark.txt'])).json.stdout, 'captured\n', 'the fork stands on the captured layer');
    t.equal((await cp.rig.call('DELETE', `/v1/machines/${fork.json.id}`, { key })).status, 204);
  });

  if (TEST_ENGINE === 'sqlite') await t.test('killed before the substrate acted: error, no blob left', async (t) => {
    const before = blobsIn(cp.root);
    const { signal } = await cp.crashAt('snapshots.capture.before_substrate', key, 'POST', '/v1/snapshots?wait=true', { machine_id: id });
    t.equal(signal, 'SIGKILL');
    const pending = (await snapshotsOf()).find((s) => s.state === 'pending')!;
    t.ok(pending, 'a pending record was left');
    await cp.rig.services.machines.reconcile();
    t.equal((await cp.rig.call('GET', `/v1/snapshots/${pending.id}`, { key })).json.state, 'error');
    t.match((await eventsOf(cp.rig, key, id)).filter((e) => e.type.startsWith('snapshot.')).at(-1), {
      type: 'snapshot.failed', data: { snapshot_id: pending.id, reconciled: true },
    });
    t.same(blobsIn(cp.root), before, 'no blob was made or left');
    t.equal((await cp.rig.call('DELETE', `/v1/snapshots/${pending.id}`, { key })).status, 204, 'the failed snapshot can be deleted');
  });

  t.equal((await exec(id, ['cat', '/home/agent/mark.txt'])).json.stdout, 'captured\n', 'the machine ran throughout and answers');
});

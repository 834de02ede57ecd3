/**
 * Machines killed from outside the control plane (issue 14 items 2, 3), on real podman containers through /v1:
 * - `podman kill`: the substrate watch moves the running machine to `error` with `machine.failed`; start works;
 * - a clean shutdown from outside (`podman stop`: the init exits 0): `stopped` with `machine.stopped`;
 * - conmon killed, then a user's stop: it answers only once nothing of the machine runs (a container podman can no
 *   longer drive is killed through its cgroup and replaced on the same disk), and start works.
 * One machine throughout. Needs root, podman and runc.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';
import { agentAnswers, eventsOf, killConmon, killContainer, machineState, podmanOf, podmanState } from '../helpers/faults.js';
import { containerName } from '../../control-plane/src/substrate/container/podman-argv.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

t.test('machines killed or stopped from outside', { timeout: 900_000 }, async (t) => {
  const { rig, substrate, root, created } = await containerMachinesRig(t, '/tmp/cpf-');
  const liveProcs = (ctr: string) => {
    try {
      return fs.readFileSync(`/sys/fs/cgroup/pids/libpod_parent/libpod-${ctr}/cgroup.procs`, 'utf8').split('\n').filter(Boolean).length;
    } catch {
      return 0;
    }
  };
  const ctrId = () => JSON.parse(fs.readFileSync(path.join(root, 'machines', id, 'machine.json'), 'utf8')).ctrId as string;
  const stopWatch = rig.services.machines.startWatch();
  t.teardown(stopWatch);
  const { key } = await rig.tenant();
  const c = await rig.call('POST', '/v1/machines', { key, body: { name: 'victim' } });
  t.equal(c.status, 201, c.text);
  const id = c.json.id as string;
  created.push(id);
  t.equal(c.json.state, 'running');
  const base = `/v1/machines/${id}`;
  const failedEvents = async () => (await eventsOf(rig, key, id)).filter((e) => e.type === 'machine.failed');

  await t.test('podman kill: error with machine.failed, then start works', async (t) => {
    await agentAnswers(rig, key, id);
    await killContainer(substrate, id);
    t.equal(await machineState(rig, key, id, ['error', 'stopped']), 'error', 'a killed machine is in error');
    const failed = await failedEvents();
    t.equal(failed.length, 1, 'one machine.failed');
    t.match(failed[0]!.data, { from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: 'exited' });
    const ex = await rig.call('POST', `${base}/exec`, { key, body: { command: ['true'] } });
    t.equal(ex.status, 409, 'agent calls say the machine is not running, not a 503 to retry');
    const s = await rig.call('POST', `${base}/start`, { key });
    t.equal(s.status, 200, s.text);
    t.equal(s.json.state, 'running');
    await agentAnswers(rig, key, id);
  });

  await t.test('a clean shutdown from outside: stopped, then start works', async (t) => {
    // A long grace period: under load the init's orderly shutdown must not be cut short by podman's SIGKILL.
    await podmanOf(substrate, 'stop', '-t', '120', containerName(id));
    t.equal(await machineState(rig, key, id, ['error', 'stopped']), 'stopped', 'the guest ended itself cleanly');
    const stopped = (await eventsOf(rig, key, id)).filter((e) => e.type === 'machine.stopped');
    t.match(stopped.at(-1)!.data, { from: 'running', to: 'stopped', reason: 'guest_shutdown' });
    t.equal((await failedEvents()).length, 1, 'no new machine.failed');
    const s = await rig.call('POST', `${base}/start`, { key });
    t.equal(s.status, 200, s.text);
    await agentAnswers(rig, key, id);
  });

  await t.test('conmon killed: a stop is real and start works', async (t) => {
    // Without its monitor the container either dies (once something writes to its output) or lives on, and
    // podman's view of it goes stale either way: the watch is paused so the user's stop meets whichever it is.
    stopWatch();
    const before = ctrId();
    await killConmon(substrate, id);
    await rig.call('POST', `${base}/exec`, { key, body: { command: ['true'] } });
    const st = await rig.call('POST', `${base}/stop`, { key });
    t.equal(st.status, 200, st.text);
    t.equal(st.json.state, 'stopped');
    t.not(await podmanState(substrate, id), 'running', 'nothing runs after a stop reported done');
    t.equal(liveProcs(before), 0, 'no process left in the old container\'s cgroup');
    const s = await rig.call('POST', `${base}/start`, { key });
    t.equal(s.status, 200, s.text);
    t.equal(await podmanState(substrate, id), 'running');
    await agentAnswers(rig, key, id);
    const final = await rig.call('POST', `${base}/stop`, { key });
    t.equal(final.status, 200, 'an ordinary stop after the recovery');
  });
});

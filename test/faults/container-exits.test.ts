/**
 * Machines killed from outside the control plane (issue 14 items 2, 3), on real podman containers through /v1:
 * - `podman kill`: the substrate watch moves the running machine to `error` with `machine.failed`; start works;
 * - a clean shutdown from outside (`podman stop`: the init exits 0): `stopped` with `machine.stopped`;
 * - conmon killed: the watch sees the dead machine (podman still says running), start works again;
 * - conmon killed under a user's stop: the stop answers only once nothing runs, start works (podman 4.3 copes
 *   with this one itself; the check stays so a regression shows).
 * One machine throughout. Needs root, podman and runc.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';
import { agentAnswers, eventsOf, killConmon, killContainer, machineState, podmanOf, podmanState } from '../helpers/faults.js';
import { containerName } from '../../control-plane/src/substrate/container/podman-argv.js';

t.test('machines killed or stopped from outside', { timeout: 900_000 }, async (t) => {
  const { rig, substrate, root, created } = await containerMachinesRig(t, '/tmp/cpf-');
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
    await podmanOf(substrate, 'stop', '-t', '10', containerName(id));
    t.equal(await machineState(rig, key, id, ['error', 'stopped']), 'stopped', 'the guest ended itself cleanly');
    const stopped = (await eventsOf(rig, key, id)).filter((e) => e.type === 'machine.stopped');
    t.match(stopped.at(-1)!.data, { from: 'running', to: 'stopped', reason: 'guest_shutdown' });
    t.equal((await failedEvents()).length, 1, 'no new machine.failed');
    const s = await rig.call('POST', `${base}/start`, { key });
    t.equal(s.status, 200, s.text);
    await agentAnswers(rig, key, id);
  });

  await t.test('conmon killed: the watch moves the machine to error, start works', async (t) => {
    const before = ctrId();
    await killConmon(substrate, id);
    t.equal(await machineState(rig, key, id, ['error', 'stopped']), 'error');
    t.equal((await failedEvents()).length, 2, 'a second machine.failed');
    // podman's stop times out waiting for the exit file conmon would have written: the container is replaced.
    const s = await rig.call('POST', `${base}/start`, { key });
    t.not(ctrId(), before, 'the container podman lost track of was replaced');
    t.equal(s.status, 200, s.text);
    t.equal(await podmanState(substrate, id), 'running', 'podman runs the (replaced) container');
    await agentAnswers(rig, key, id);
  });

  await t.test('conmon killed under a user stop: the stop is real, start works', async (t) => {
    stopWatch();
    await killConmon(substrate, id);
    const st = await rig.call('POST', `${base}/stop`, { key });
    t.equal(st.status, 200, st.text);
    t.equal(st.json.state, 'stopped');
    t.not(await podmanState(substrate, id), 'running', 'nothing runs after a stop reported done');
    const s = await rig.call('POST', `${base}/start`, { key });
    t.equal(s.status, 200, s.text);
    await agentAnswers(rig, key, id);
    const final = await rig.call('POST', `${base}/stop`, { key });
    t.equal(final.status, 200, 'an ordinary stop after the recovery');
  });
});

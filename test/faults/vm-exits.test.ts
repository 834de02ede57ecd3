/**
 * The substrate watch on the vm substrate (issue 14 item 2): QEMU killed from outside (SIGKILL: its pid file
 * stays) → `error` with `machine.failed`, and start works; the guest powering itself off (init's shutdown ends
 * in a sysrq power-off, QEMU exits and removes its pid file) → `stopped` with `machine.stopped {reason:
 * guest_shutdown}`. One machine (TCG on hosts without usable KVM).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { vmFiles } from '../../control-plane/src/substrate/vm/argv.js';
import { agentAnswers, eventsOf, machineState } from '../helpers/faults.js';
import { vmMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

t.test('vm machines killed or powered off from outside', { timeout: 1_500_000 }, async (t) => {
  const { rig, root, created } = await vmMachinesRig(t, '/tmp/cpvf-');
  const stopWatch = rig.services.machines.startWatch();
  t.teardown(stopWatch);
  const { key } = await rig.tenant('developer', ['machines:read', 'machines:write', 'machines:control']);
  const c = await rig.call('POST', '/v1/machines', { key, body: { name: 'vm-victim' } });
  t.equal(c.status, 201, c.text);
  const id = c.json.id as string;
  created.push(id);
  const pidFile = vmFiles(path.join(root, 'machines', id)).pidFile;

  await agentAnswers(rig, key, id, 600);
  process.kill(Number(fs.readFileSync(pidFile, 'utf8').trim()), 'SIGKILL');
  t.equal(await machineState(rig, key, id, ['error', 'stopped']), 'error', 'a killed VM is in error');
  t.match((await eventsOf(rig, key, id)).at(-1), { type: 'machine.failed', data: { operation: 'run', reason: 'exited' } });
  const s = await rig.call('POST', `/v1/machines/${id}/start`, { key });
  t.equal(s.status, 200, s.text);
  await agentAnswers(rig, key, id, 600);

  // The guest ends itself: its init's shutdown (TERM to PID 1's child) syncs and powers off.
  await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', 'kill -TERM 1'], user: 'root' } });
  t.equal(await machineState(rig, key, id, ['error', 'stopped'], 240), 'stopped', 'a guest power-off is a stop');
  t.match((await eventsOf(rig, key, id)).filter((e) => e.type === 'machine.stopped').at(-1), { data: { reason: 'guest_shutdown' } });
  t.notOk(fs.existsSync(pidFile), 'QEMU removed its pid file');
});

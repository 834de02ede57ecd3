/**
 * A wedged agent (issue 14 item 7), in a real container machine: the agent process is stopped with SIGSTOP from
 * the host. Calls fail fast on the channel's health ping ("not responding") instead of waiting out the request
 * deadline (60 s in this rig; whichever of the ping and the guest's watchdog acts first), and the guest init's watchdog kills the stopped agent so its loop restarts it:
 * the machine answers again with a new agent process, without anyone touching it.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { agentAnswers } from '../helpers/faults.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

/** The guest agent's host pid: the process in the container's cgroup running the agent's main.js. */
function agentPid(root: string, id: string): number | null {
  const ctrId = JSON.parse(fs.readFileSync(path.join(root, 'machines', id, 'machine.json'), 'utf8')).ctrId as string;
  const procs = fs.readFileSync(`/sys/fs/cgroup/pids/libpod_parent/libpod-${ctrId}/cgroup.procs`, 'utf8').split('\n').filter(Boolean);
  for (const p of procs) {
    try {
      if (fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('agent/src/main.js')) return Number(p);
    } catch {
      /* exited */
    }
  }
  return null;
}

t.test('a SIGSTOPped agent', { timeout: 900_000 }, async (t) => {
  const { rig, root, created } = await containerMachinesRig(t, '/tmp/cpw-');
  const { key } = await rig.tenant();
  const c = await rig.call('POST', '/v1/machines', { key, body: { name: 'wedged' } });
  t.equal(c.status, 201, c.text);
  const id = c.json.id as string;
  created.push(id);
  await agentAnswers(rig, key, id);
  const pid = agentPid(root, id);
  t.ok(pid, 'found the agent process');
  process.kill(pid!, 'SIGSTOP');
  t.teardown(() => {
    try {
      process.kill(pid!, 'SIGCONT');
    } catch {
      /* restarted: gone */
    }
  });

  const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['true'] } });
  t.equal(r.status, 503, r.text);
  t.equal(r.json.error.code, 'compute_unavailable');
  // Either the health ping gave up on it or the init's watchdog killed it first (connection reset); never the
  // request deadline (60 s here), which says "did not answer in time".
  t.match(r.json.error.message, /^The machine agent (is not responding|connection failed|closed the request without answering)\.$/, 'failed fast');

  await agentAnswers(rig, key, id);
  const again = agentPid(root, id);
  t.ok(again && again !== pid, 'a new agent process answers');
  t.notOk(fs.existsSync(`/proc/${pid}`), 'the stopped agent was killed');
});

/**
 * Each machine its own identity (issue 26 item 1), on real podman containers: two cold creates get different
 * machine-ids (32 lowercase hex and a newline, written before the guest starts) and hostnames from those (`computer-` and the first 12 hex);
 * a fork does not keep its parent's machine-id; a machine keeps its own across a stop and start.
 */
import t from 'tap';
import { until } from '../helpers/machines-rig.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

t.test('cold creates and forks: each machine its own machine-id and hostname', async (t) => {
  const { rig, created } = await containerMachinesRig(t, '/tmp/pool-identity-');
  const a = await rig.tenant('pro');
  const create = async (path: string, body: Record<string, unknown>) => {
    const r = await rig.call('POST', path, { key: a.key, body });
    t.equal(r.status, 201, `${path}`);
    created.push(r.json.id);
    return r.json.id as string;
  };
  const identity = async (id: string) => {
    // 503 while the agent is coming up after a create or start.
    const r = await until(`the agent of ${id}`, 240, async () => {
      const r = await rig.call('POST', `/v1/machines/${id}/exec`, {
        key: a.key, body: { command: ['sh', '-c', 'cat /etc/machine-id; hostname; cat /etc/hostname'], user: 'root', timeout_ms: 60_000 },
      });
      return r.status === 200 ? r : r.status === 503 ? null : Promise.reject(new Error(`exec ${r.status} ${r.text}`));
    });
    const out = r.json.stdout as string;
    const nl = out.indexOf('\n');
    return { machineIdFile: out.slice(0, nl + 1), hostname: out.slice(nl + 1).split('\n')[0], hostnameFile: out.slice(nl + 1).split('\n')[1] };
  };

  const one = await create('/v1/machines', {});
  const two = await create('/v1/machines', {});
  const i1 = await identity(one);
  const i2 = await identity(two);
  t.match(i1.machineIdFile, /^[0-9a-f]{32}\n$/, 'a valid machine-id');
  t.match(i2.machineIdFile, /^[0-9a-f]{32}\n$/, 'a valid machine-id');
  t.not(i1.machineIdFile, i2.machineIdFile, 'two machines, two machine-ids');
  // The hostname is per machine but names neither its API id nor the substrate (guest files name neither).
  t.same([i1.hostname, i1.hostnameFile], [`computer-${i1.machineIdFile.slice(0, 12)}`, `computer-${i1.machineIdFile.slice(0, 12)}`], 'hostname: computer- and the first 12 hex of the machine-id');
  t.same([i2.hostname, i2.hostnameFile], [`computer-${i2.machineIdFile.slice(0, 12)}`, `computer-${i2.machineIdFile.slice(0, 12)}`]);
  t.not(i1.hostname, i2.hostname, 'two machines, two hostnames');

  const fork = await create(`/v1/machines/${one}/fork`, {});
  const iF = await identity(fork);
  t.match(iF.machineIdFile, /^[0-9a-f]{32}\n$/);
  t.not(iF.machineIdFile, i1.machineIdFile, "a fork does not keep its parent's machine-id");
  t.equal(iF.hostname, `computer-${iF.machineIdFile.slice(0, 12)}`, "nor its parent's hostname");

  t.equal((await rig.call('POST', `/v1/machines/${two}/stop`, { key: a.key })).json.state, 'stopped');
  t.equal((await rig.call('POST', `/v1/machines/${two}/start`, { key: a.key })).json.state, 'running');
  t.same(await identity(two), i2, 'a machine keeps its identity across a stop and start');
});

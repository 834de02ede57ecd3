/**
 * Warm pool isolation on real podman containers (issue 26 item 1): organization A takes a pooled machine,
 * leaves files, a running process, its network identity and its agent key in it, and deletes it; organization B
 * takes the next pooled machine and finds nothing of A's. Pool members appear in no organization's list. The
 * pool is driven pass by pass (its timer is set out of the way), so nothing here waits on a clock.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { containerName } from '../../control-plane/src/substrate/container/podman-argv.js';
import { podmanOf } from '../helpers/faults.js';
import { H2Client } from '../helpers/h2-client.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

t.test('a pooled machine taken by B holds nothing of what A did in the one before', async (t) => {
  const { rig, substrate, created } = await containerMachinesRig(t, '/tmp/warm-pool-', { warmPool: { tickMs: 3_600_000 } }, { env: { WARM_POOL_PER_SIZE: '1' } });
  const pool = rig.services.machines.warmPool;
  t.teardown(() => pool.drain());
  pool.start();
  const a = await rig.tenant('pro');
  const b = await rig.tenant('pro');
  const exec = async (key: string, id: string, script: string) => {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', script], user: 'root', timeout_ms: 60_000 } });
    t.equal(r.status, 200, `exec: ${script}`);
    return r.json as { stdout: string; exit_code: number };
  };
  const create = async (key: string) => {
    const r = await rig.call('POST', '/v1/machines', { key, body: {} });
    t.equal(r.status, 201);
    created.push(r.json.id);
    return r.json.id as string;
  };
  const ids = async (key: string) => ((await rig.call('GET', '/v1/machines', { key })).json.data as Array<{ id: string }>).map((m) => m.id);

  // A's first create boots cold and is the demand the pool fills for. The demand starts a fill at once (beside the
  // cold boot, which may finish first or not); the tick below runs after that fill.
  t.same(pool.ready().small ?? [], [], 'no member before any demand');
  const cold = await create(a.key);
  await pool.tick();
  const [first] = pool.ready().small!;
  t.ok(first, 'one member after one small create');
  t.equal(await substrate.status(first!), 'running', 'a started container');
  t.same(await ids(a.key), [cold], "the member is not in A's list");
  t.same(await ids(b.key), [], "nor in B's");
  t.equal((await rig.call('DELETE', `/v1/machines/${cold}`, { key: a.key })).status, 204);

  const mA = await create(a.key);
  t.equal(mA, first, 'A took the pooled machine');
  t.equal((await exec(a.key, mA, 'echo')).exit_code, 0, "its agent answers with A's key");
  const aSecretFile = 'a-was-here-7d1f';
  await exec(a.key, mA, `echo ${aSecretFile} > /root/${aSecretFile} && echo x > /home/agent/${aSecretFile} && echo x > /tmp/${aSecretFile} && echo x > /var/tmp/${aSecretFile}`);
  await exec(a.key, mA, 'setsid -f sleep 31337 </dev/null >/dev/null 2>&1');
  t.match((await exec(a.key, mA, 'ps -eo args')).stdout, /sleep 31337/, "A's process runs");
  const identity = 'cat /sys/class/net/eth0/address; ip -4 -o addr show eth0 | awk \'{print $4}\'; cat /etc/machine-id; hostname';
  const aIdentity = (await exec(a.key, mA, identity)).stdout.split('\n');
  t.match(aIdentity[1], /^\d+\.\d+\.\d+\.\d+\/\d+$/, "A's address read");
  t.match(aIdentity[2], /^[0-9a-f]{32}$/, "A's machine-id: 32 lowercase hex");
  t.equal(aIdentity[3], `computer-${aIdentity[2]!.slice(0, 12)}`, "A's hostname: computer- and its machine-id's first 12 hex");
  const aKey = (await rig.store.db.q().selectFrom('machines').select('agent_token').where('id', '=', mA).executeTakeFirstOrThrow()).agent_token;

  // The pool refills while A's machine lives, then A deletes it.
  await pool.tick();
  const [second] = pool.ready().small!;
  t.ok(second && second !== mA, 'a new member');
  // What the member is before anyone takes it, seen from the host.
  const preTake = {
    machineId: fs.readFileSync(path.join(substrate.mergedPath(second!), 'etc/machine-id'), 'utf8'),
    hostname: await podmanOf(substrate, 'exec', containerName(second!), 'hostname'),
  };
  t.match(preTake.machineId, /^[0-9a-f]{32}\n$/, 'the member has a machine-id of its own');
  t.equal(preTake.hostname, `computer-${preTake.machineId.slice(0, 12)}`, 'and the hostname it gives');
  t.equal((await rig.call('DELETE', `/v1/machines/${mA}`, { key: a.key })).status, 204);
  t.equal(await substrate.status(mA), 'absent', "A's machine is gone from the host");

  const mB = await create(b.key);
  t.equal(mB, second, 'B took the next pooled machine');
  t.not(mB, mA, 'its own machine id');
  t.same(await ids(b.key), [mB], "B's list: B's machine only");
  t.same(await ids(a.key), [], "A's list: nothing");
  const files = await exec(b.key, mB, `ls -a /root /home/agent /tmp /var/tmp; find / -xdev -name '${aSecretFile}*' 2>/dev/null; grep -rl ${aSecretFile} /root /home /etc 2>/dev/null; true`);
  t.notMatch(files.stdout, aSecretFile, "none of A's files");
  t.notMatch((await exec(b.key, mB, 'ps -eo args')).stdout, /31337/, "none of A's processes");
  const bIdentity = (await exec(b.key, mB, identity)).stdout.split('\n');
  t.not(bIdentity[0], aIdentity[0], 'its own MAC');
  t.not(bIdentity[1], aIdentity[1], 'its own address');
  t.match(bIdentity[2], /^[0-9a-f]{32}$/, "B's machine-id: 32 lowercase hex");
  t.not(bIdentity[2], aIdentity[2], "not A's machine-id");
  t.not(`${bIdentity[2]}\n`, preTake.machineId, "not the member's machine-id before the take");
  t.equal(bIdentity[3], `computer-${bIdentity[2]!.slice(0, 12)}`, "B's hostname: computer- and its machine-id's first 12 hex");
  t.not(bIdentity[3], aIdentity[3], "not A's hostname");
  t.not(bIdentity[3], preTake.hostname, "not the member's hostname before the take");
  t.equal((await exec(b.key, mB, 'cat /etc/hostname; getent hosts "$(hostname)" computer | cut -f1 -d" "')).stdout, `${bIdentity[3]}\n127.0.1.1\n127.0.1.1\n`, '/etc/hostname agrees; the hostname and the alias `computer` resolve locally');
  t.notMatch((await exec(b.key, mB, 'ip neigh; cat /proc/net/arp')).stdout, aIdentity[1]!.split('/')[0]!, "A's address is not in its neighbour table");
  // A's agent key opens nothing in B's machine; B's key does.
  const bKey = (await rig.store.db.q().selectFrom('machines').select('agent_token').where('id', '=', mB).executeTakeFirstOrThrow()).agent_token;
  t.not(bKey, aKey, 'a fresh agent key');
  const withA = new H2Client(substrate.channelPath(mB), aKey);
  t.teardown(() => withA.session.destroy());
  t.equal((await withA.request('GET', '/display')).status, 401, "A's key is refused by B's agent");
  const withB = new H2Client(substrate.channelPath(mB), bKey);
  t.teardown(() => withB.session.destroy());
  t.equal((await withB.request('GET', '/display')).status, 200, "B's key is the one enrolled");
  t.notMatch((await exec(b.key, mB, `ls -a /run/computer-channel`)).stdout, /enroll\b|\.enroll-/, 'no enrollment secret left in the channel directory');
  t.notMatch((await exec(b.key, mB, `grep -rls -- '${aKey}' /root /home /etc /run /tmp /var 2>/dev/null; true`)).stdout, /\S/, "A's key is nowhere in B's machine");
});

/**
 * Each machine its own identity (issue 26 item 1) on the vm substrate, with real QEMU guests (TCG here: about
 * 17 s a boot, so at most two guests at a time). The driver records a machine-id and hostname at create and puts
 * them on the kernel command line at every boot; the image's init (computer-identity) writes them. Two creates
 * get different, valid machine-ids (32 lowercase hex and a newline) and hostnames from those (`computer-` and
 * the first 12 hex), both as the driver's record says, with `computer` still resolving; a machine whose disk
 * holds other files (written as guest root, and captured in a snapshot) comes back with its own after a stop
 * and start and after a restore; a fork gets a new one.
 */
import t from 'tap';
import { peekRecord } from '../../control-plane/src/substrate/records.js';
import { until, type MachinesRig } from '../helpers/machines-rig.js';
import { vmMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_800_000);

const ALL = ['machines:read', 'machines:write', 'machines:control', 'snapshots:read', 'snapshots:write'];

interface GuestIdentity {
  machineIdFile: string;
  hostname: string;
  hostnameFile: string;
  /** `getent hosts computer`, blanks collapsed. */
  computerResolves: string;
}

/** Root exec in the guest, retried while its agent is not up yet (503). */
async function rootSh(rig: MachinesRig, key: string, id: string, script: string): Promise<string> {
  return until(`exec on ${id}`, 600, async () => {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', script], user: 'root', timeout_ms: 60_000 } });
    if (r.status === 200) return r.json.stdout as string;
    if (r.status !== 503) throw new Error(`exec: ${r.status} ${r.text}`);
    return null;
  });
}

async function guestIdentity(rig: MachinesRig, key: string, id: string): Promise<GuestIdentity> {
  const out = await rootSh(rig, key, id, 'cat /etc/machine-id; echo .; hostname; cat /etc/hostname; getent hosts computer');
  const [machineIdFile = '', rest = ''] = out.split('.\n');
  const [hostname = '', hostnameFile = '', computerResolves = ''] = rest.split('\n');
  return { machineIdFile, hostname, hostnameFile, computerResolves: computerResolves.replace(/\s+/g, ' ') };
}

t.test('vm machines: each its own machine-id and hostname, kept across a restart and a restore, new in a fork', { timeout: 1_800_000 }, async (t) => {
  const { rig, root, created } = await vmMachinesRig(t, '/tmp/vm-identity-');
  const { key } = await rig.tenant('pro', ALL);
  const create = async (path: string) => {
    const r = await rig.call('POST', path, { key, body: {} });
    t.equal(r.status, 201, path);
    created.push(r.json.id);
    return r.json.id as string;
  };
  /** What the driver recorded for the machine: the source of truth the guest must show. */
  const recorded = (id: string) => peekRecord<{ identity?: { machineId: string; hostname: string } }>(root, id)?.identity;
  /** The guest shows its record's identity: the files, the running hostname, and `computer` as an alias. */
  const showsRecord = (got: GuestIdentity, id: string, what: string) => {
    const rec = recorded(id);
    t.ok(rec, `${what}: the driver recorded an identity`);
    t.same(got, {
      machineIdFile: `${rec?.machineId}\n`,
      hostname: rec?.hostname,
      hostnameFile: rec?.hostname,
      computerResolves: `127.0.1.1 ${rec?.hostname} computer`,
    }, `${what}: the guest's machine-id, hostname and hosts are its record's`);
  };

  const one = await create('/v1/machines');
  const two = await create('/v1/machines');
  const i1 = await guestIdentity(rig, key, one);
  const i2 = await guestIdentity(rig, key, two);
  for (const i of [i1, i2]) {
    t.match(i.machineIdFile, /^[0-9a-f]{32}\n$/, 'a valid machine-id: 32 lowercase hex and a newline');
    t.equal(i.hostname, `computer-${i.machineIdFile.slice(0, 12)}`, 'hostname: computer- and the first 12 hex of the machine-id');
  }
  t.not(i1.machineIdFile, i2.machineIdFile, 'two machines, two machine-ids');
  t.not(i1.hostname, i2.hostname, 'two machines, two hostnames');
  showsRecord(i1, one, 'first machine');
  showsRecord(i2, two, 'second machine');

  // Guest root rewrites the files and the disk is captured that way: the record, not the disk, decides.
  const tamper = "echo ffffffffffffffffffffffffffffffff > /etc/machine-id; echo tampered > /etc/hostname; printf '127.0.0.1 localhost\\n' > /etc/hosts; sync";
  await rootSh(rig, key, two, tamper);
  const snap = await rig.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: two, name: 'tampered' } });
  t.equal(snap.status, 201, 'snapshot of the rewritten disk');
  t.equal((await rig.call('POST', `/v1/machines/${two}/stop`, { key })).json.state, 'stopped');
  t.equal((await rig.call('POST', `/v1/machines/${two}/start`, { key })).json.state, 'running');
  t.same(await guestIdentity(rig, key, two), i2, 'a stop and start boots with its own identity again');
  const restored = await rig.call('POST', `/v1/machines/${two}/restore`, { key, body: { snapshot_id: snap.json.id } });
  t.equal(restored.status, 200, 'restored onto the rewritten disk');
  t.same(await guestIdentity(rig, key, two), i2, 'and so does a restore');
  t.equal((await rig.call('DELETE', `/v1/machines/${two}`, { key })).status, 204);

  const fork = await create(`/v1/machines/${one}/fork`);
  const iF = await guestIdentity(rig, key, fork);
  t.match(iF.machineIdFile, /^[0-9a-f]{32}\n$/);
  t.not(iF.machineIdFile, i1.machineIdFile, "a fork does not keep its parent's machine-id");
  t.not(iF.hostname, i1.hostname, "nor its parent's hostname");
  showsRecord(iF, fork, 'fork');
});

/**
 * Snapshots end to end on the vm substrate (QEMU, TCG where KVM is unusable: about 17 s a boot, so one compact
 * round trip, at most two guests at a time): a file written before a live snapshot (QMP blockdev-snapshot-sync)
 * and changed after it reads back exactly as captured after a restore, in a fork that survives its parent's
 * deletion, and in a machine created from a template; at the end no qcow2 layer is left.
 * The same boots prove each machine its own identity (issue 26 item 1, test/helpers/vm-identity.ts): guest root
 * rewrote the identity files before the capture, yet the restore boots with the machine's own recorded identity,
 * and the fork and the machine from the template each get a new one of their own (two creates, two identities).
 */
import t from 'tap';
import { until, type MachinesRig } from '../helpers/machines-rig.js';
import { vmMachinesRig } from '../helpers/substrate-rigs.js';
import { assertOwnIdentity, rootSh, TAMPER_IDENTITY } from '../helpers/vm-identity.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const ALL = ['machines:read', 'machines:write', 'machines:control', 'snapshots:read', 'snapshots:write', 'templates:read', 'templates:write'];
const FILE = '/home/agent/state.txt';

/** exec in the guest, retried while its agent is not up yet (503). */
async function sh(rig: MachinesRig, key: string, id: string, script: string): Promise<string> {
  return until(`exec on ${id}`, 600, async () => {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', script] } });
    if (r.status === 200) return r.json.stdout as string;
    if (r.status !== 503) throw new Error(`exec: ${r.status} ${r.text}`);
    return null;
  });
}

t.test('snapshot → restore → fork → template on the vm substrate', { timeout: 1_500_000 }, async (t) => {
  const { rig, substrate: sub, root, created } = await vmMachinesRig(t, '/tmp/cpvs-');
  const { key } = await rig.tenant('pro', ALL);
  const read = (id: string) => sh(rig, key, id, `cat ${FILE}`);

  const m = (await rig.call('POST', '/v1/machines', { key, body: { name: 'vm-snap' } })).json;
  created.push(m.id);
  t.equal(m.state, 'running');
  const iM = await assertOwnIdentity(t, rig, root, key, m.id, 'a created machine');
  // Guest root rewrites the identity files and the disk is captured that way: the record, not the disk, decides.
  await rootSh(rig, key, m.id, TAMPER_IDENTITY);
  await sh(rig, key, m.id, `echo captured > ${FILE} && sync`);
  const s1 = await rig.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: m.id, name: 'v1' } });
  t.equal(s1.status, 201);
  t.match(s1.json, { state: 'ready', includes_memory: false });
  await sh(rig, key, m.id, `echo changed > ${FILE} && sync`);
  t.equal(await read(m.id), 'changed\n', 'the machine kept running across the live capture');

  const r = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key, body: { snapshot_id: s1.json.id } });
  t.equal(r.status, 200, 'restored');
  t.equal(r.json.state, 'running');
  t.equal(await read(m.id), 'captured\n', 'after restore the file reads back as captured');
  t.same(await assertOwnIdentity(t, rig, root, key, m.id, 'restored'), iM, 'a restore onto the rewritten disk boots with its own identity again');

  const f = await rig.call('POST', `/v1/machines/${m.id}/fork`, { key, body: { snapshot_id: s1.json.id } });
  t.equal(f.status, 201);
  created.push(f.json.id);
  t.equal((await rig.call('DELETE', `/v1/machines/${m.id}`, { key })).status, 204, 'parent deleted');
  t.equal(await read(f.json.id), 'captured\n', 'the fork reads the file as captured, after its parent is gone');
  const iF = await assertOwnIdentity(t, rig, root, key, f.json.id, 'fork');
  t.not(iF.machineIdFile, iM.machineIdFile, "a fork does not keep its parent's machine-id");
  t.not(iF.hostname, iM.hostname, "nor its parent's hostname");
  t.equal((await rig.call('DELETE', `/v1/machines/${f.json.id}`, { key })).status, 204);

  const tpl = await rig.call('POST', '/v1/templates?wait=true', { key, body: { name: 'vm v1', snapshot_id: s1.json.id } });
  t.equal(tpl.status, 201);
  const c = (await rig.call('POST', '/v1/machines', { key, body: { template: tpl.json.id } })).json;
  created.push(c.id);
  t.equal(await read(c.id), 'captured\n', 'a machine from the template reads the file as captured');
  const iC = await assertOwnIdentity(t, rig, root, key, c.id, 'created from the template');
  t.not(iC.machineIdFile, iM.machineIdFile, 'two created machines, two machine-ids');
  t.not(iC.hostname, iM.hostname, 'two created machines, two hostnames');
  t.not(iC.machineIdFile, iF.machineIdFile, 'and not the fork\'s either');
  t.equal((await rig.call('DELETE', `/v1/machines/${c.id}`, { key })).status, 204);

  t.equal((await rig.call('DELETE', `/v1/templates/${tpl.json.id}`, { key })).status, 204);
  const snaps = (await rig.call('GET', '/v1/snapshots', { key })).json.data;
  for (const s of [...snaps].reverse()) t.equal((await rig.call('DELETE', `/v1/snapshots/${s.id}`, { key })).status, 204);
  t.same(sub.disks.layers(), [], 'no qcow2 layer left');
});

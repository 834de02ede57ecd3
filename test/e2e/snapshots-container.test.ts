/**
 * Snapshots end to end on the container substrate (real podman, real btrfs layers, the real guest agent): a
 * file written before a snapshot and changed after it reads back exactly as captured after a restore, in a fork
 * and in a machine created from a template; a fork from now; forks survive their parent; newest-only delete on
 * real chains; and once everything is deleted the layer store holds no layer (nothing leaked).
 * Needs root, podman and runc; the image is built on first use (minutes), then cached.
 */
import t from 'tap';
import fs from 'node:fs';
import { assertEnvelope } from '../helpers/control-plane.js';
import { until, type MachinesRig } from '../helpers/machines-rig.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const ALL = ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write', 'templates:read', 'templates:write'];
const FILE = '/home/agent/state.txt';

async function readFile(rig: MachinesRig, key: string, id: string): Promise<string> {
  return until(`${FILE} on ${id}`, 240, async () => {
    const r = await rig.call('GET', `/v1/machines/${id}/files/content?path=${encodeURIComponent(FILE)}&encoding=utf8`, { key });
    if (r.status === 200) return r.json.content as string;
    if (r.status !== 503) throw new Error(`read: ${r.status} ${r.text}`);
    return null;
  });
}

async function writeFile(rig: MachinesRig, key: string, id: string, content: string): Promise<void> {
  await until(`a write on ${id}`, 240, async () => {
    const r = await rig.call('PUT', `/v1/machines/${id}/files/content?path=${encodeURIComponent(FILE)}`, { key, body: { content } });
    if (r.status === 200) return true;
    if (r.status !== 503) throw new Error(`write: ${r.status} ${r.text}`);
    return null;
  });
}

t.test('snapshot, fork, template, restore on real layers', { timeout: 1_200_000 }, async (t) => {
  const { rig, substrate, root, created } = await containerMachinesRig(t, '/tmp/cps-');
  const a = await rig.tenant('pro', ALL);
  const key = a.key;
  const create = async (body: object) => {
    const r = await rig.call('POST', '/v1/machines', { key, body });
    t.equal(r.status, 201, `created ${JSON.stringify(body)}`);
    created.push(r.json.id);
    return r.json;
  };
  const snapshot = async (machineId: string, name: string) => {
    const r = await rig.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: machineId, name } });
    t.equal(r.status, 201, `snapshot ${name}`);
    t.match(r.json, { state: 'ready', includes_memory: false });
    return r.json;
  };

  const m = await create({ name: 'origin' });
  await writeFile(rig, key, m.id, 'captured v1');
  const s1 = await snapshot(m.id, 'v1');
  t.ok(s1.size_bytes > 0, 'the layer holds what was written');
  await writeFile(rig, key, m.id, 'changed after the snapshot');
  t.equal(await readFile(rig, key, m.id), 'changed after the snapshot', 'the running machine kept running and writing');

  // fork from the snapshot
  const f = await rig.call('POST', `/v1/machines/${m.id}/fork`, { key, body: { snapshot_id: s1.id, name: 'fork-v1' } });
  t.equal(f.status, 201);
  created.push(f.json.id);
  t.equal(f.json.state, 'running');
  t.equal(await readFile(rig, key, f.json.id), 'captured v1', 'the fork reads the file exactly as captured');

  // fork from now
  const now = await rig.call('POST', `/v1/machines/${m.id}/fork`, { key, body: {} });
  created.push(now.json.id);
  t.equal(await readFile(rig, key, now.json.id), 'changed after the snapshot', 'a fork from now sees the current disk');
  t.equal((await rig.call('DELETE', `/v1/machines/${now.json.id}`, { key })).status, 204);

  // template from the snapshot, and a machine from it
  const tpl = await rig.call('POST', '/v1/templates?wait=true', { key, body: { name: 'v1 box', snapshot_id: s1.id } });
  t.equal(tpl.status, 201);
  const fromTpl = await create({ template: tpl.json.id });
  t.equal(fromTpl.template, tpl.json.id);
  t.equal(await readFile(rig, key, fromTpl.id), 'captured v1', 'a machine from the template reads the file as captured');
  t.equal((await rig.call('DELETE', `/v1/templates/${tpl.json.id}`, { key })).status, 204, 'template deleted');
  t.equal(await readFile(rig, key, fromTpl.id), 'captured v1', 'its machine keeps working');
  t.equal((await rig.call('DELETE', `/v1/machines/${fromTpl.id}`, { key })).status, 204);

  // restore the running machine onto the snapshot
  const r = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key, body: { snapshot_id: s1.id } });
  t.equal(r.status, 200, 'restored');
  t.equal(r.json.state, 'running', 'back running');
  t.equal(await readFile(rig, key, m.id), 'captured v1', 'after restore the file reads back exactly as captured');
  const before = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}&origin=stop`, { key })).json.data[0];
  t.match(before, { name: 'Before restore', origin: 'stop', state: 'ready' });

  // restore a stopped machine onto Before restore: it boots into it at its next start
  t.equal((await rig.call('POST', `/v1/machines/${m.id}/stop`, { key })).json.state, 'stopped');
  t.equal((await rig.call('POST', `/v1/machines/${m.id}/restore`, { key, body: { snapshot_id: before.id } })).json.state, 'stopped');
  t.equal((await rig.call('POST', `/v1/machines/${m.id}/start`, { key })).json.state, 'running');
  t.equal(await readFile(rig, key, m.id), 'changed after the snapshot', 'the stopped machine booted into the restored disk');

  // newest-only delete on the real chain: v1 < Before restore < Before restore
  const chain = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}`, { key })).json.data;
  t.equal(chain.length, 3);
  const refused = await rig.call('DELETE', `/v1/snapshots/${s1.id}`, { key });
  assertEnvelope(t, refused, 'conflict', 409);
  t.match(refused.json.error.message, new RegExp(chain[2].id), 'names the newest one');

  // the parent goes; the fork keeps working
  t.equal((await rig.call('DELETE', `/v1/machines/${m.id}`, { key })).status, 204);
  t.equal(await readFile(rig, key, f.json.id), 'captured v1', 'the fork survives its parent');
  await writeFile(rig, key, f.json.id, 'fork writes on');
  t.equal(await readFile(rig, key, f.json.id), 'fork writes on');

  // everything deleted: no layer is left behind
  for (const s of [...chain].reverse()) t.equal((await rig.call('DELETE', `/v1/snapshots/${s.id}`, { key })).status, 204, `deleted ${s.name}`);
  t.ok(substrate.disks.layers().length > 0, 'the fork still stands on its layer');
  t.equal((await rig.call('DELETE', `/v1/machines/${f.json.id}`, { key })).status, 204);
  t.same(substrate.disks.layers(), [], 'no layer leaked');
  t.same(substrate.disks.disks(), [], 'no disk leaked');
  t.same(fs.readdirSync(`${root}/disks/blobs`), [], 'no blob leaked');
});

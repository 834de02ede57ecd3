/**
 * Snapshots, templates, fork and restore through /v1 with the fake substrate (its "disk" is a map of files a
 * capture copies into a layer): record shapes, states and events in order, newest-only delete, restore refused
 * under a held lease, forks surviving their parent, templates, quotas with the exact 402, RBAC, bad input, cross-
 * organization 404s, the billing stop capture, and the reconciler after a crash mid-capture.
 */
import t, { type Test } from 'tap';
import { assertEnvelope } from '../helpers/control-plane.js';
import { fakeAgentsRig, fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig, until, type MachinesRig } from '../helpers/machines-rig.js';

const ALL = ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write', 'templates:read', 'templates:write'];
const SNAPSHOT_KEYS = ['completed_at', 'created_at', 'id', 'includes_memory', 'machine_id', 'name', 'origin', 'size_bytes', 'state'];

function setup(t: Test) {
  return fakeAgentsRig(t);
}

async function machine(rig: MachinesRig, key: string, body: object = {}) {
  const r = await rig.call('POST', '/v1/machines', { key, body });
  if (r.status !== 201) throw new Error(`create ${r.status} ${r.text}`);
  return r.json;
}

async function eventTypes(rig: MachinesRig, machineId: string): Promise<string[]> {
  return (await rig.store.db.q().selectFrom('machine_events').select('type').where('machine_id', '=', machineId).orderBy('seq').execute()).map((e) => e.type);
}

/** The machine's events without `machine.ready`: the readiness watch records it in the background after a boot, before or after any later read. */
async function lifecycle(rig: MachinesRig, machineId: string): Promise<string[]> {
  return (await eventTypes(rig, machineId)).filter((e) => e !== 'machine.ready');
}

t.test('capture: 202 pending then ready, ?wait=true, list/get, events in order, newest-only delete', async (t) => {
  const { rig, sub } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const m = await machine(rig, a.key, { name: 'box' });
  sub.machines.get(m.id)!.files.set('/home/agent/notes.txt', 'v1');

  sub.setDelay('capture', 20);
  const pending = await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: m.id, name: 'first' } });
  t.equal(pending.status, 202, 'the pending record at once');
  t.same(Object.keys(pending.json).sort(), SNAPSHOT_KEYS, 'exactly the documented fields');
  t.match(pending.json, { name: 'first', machine_id: m.id, state: 'pending', origin: 'manual', includes_memory: false, size_bytes: null, completed_at: null });
  t.match(pending.json.id, /^snp_[0-9a-z]{24}$/);
  // Settled in the background: waited for by its state, not a clock (a store on PostgreSQL under load is slower).
  const ready = await until('the capture', 200, async () => {
    const r = await rig.call('GET', `/v1/snapshots/${pending.json.id}`, { key: a.key });
    return r.json.state === 'pending' ? null : r;
  });
  t.match(ready.json, { state: 'ready', size_bytes: 2 });
  t.type(ready.json.completed_at, 'string');
  t.equal(sub.machines.get(m.id)!.state, 'running', 'a running machine keeps running');
  sub.setDelay('capture', 0);

  sub.machines.get(m.id)!.files.set('/home/agent/notes.txt', 'v2');
  const waited = await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id } });
  t.equal(waited.status, 201, 'wait answers once settled');
  t.match(waited.json, { state: 'ready', origin: 'manual' });
  t.match(waited.json.name, /^box /, 'a generated name starts with the machine name');

  // stopped machines can be captured too
  await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  const cold = await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id, name: 'cold' } });
  t.equal(cold.json.state, 'ready');

  t.same((await eventTypes(rig, m.id)).filter((e) => e.startsWith('snapshot.')), [
    'snapshot.started', 'snapshot.completed', 'snapshot.started', 'snapshot.completed', 'snapshot.started', 'snapshot.completed',
  ]);

  // list: pagination and filters
  const p1 = await rig.call('GET', `/v1/snapshots?machine_id=${m.id}&limit=2`, { key: a.key });
  t.equal(p1.json.data.length, 2);
  const p2 = await rig.call('GET', `/v1/snapshots?machine_id=${m.id}&limit=2&cursor=${p1.json.next_cursor}`, { key: a.key });
  t.same([...p1.json.data, ...p2.json.data].map((s: any) => s.name), ['first', waited.json.name, 'cold']);
  t.equal(p2.json.next_cursor, null);
  t.equal((await rig.call('GET', '/v1/snapshots?origin=stop', { key: a.key })).json.data.length, 0);
  // The spec's origins are manual, stop and template: there is no fourth to filter by.
  const fourth = await rig.call('GET', '/v1/snapshots?origin=restore', { key: a.key });
  assertEnvelope(t, fourth, 'invalid_request', 400);
  t.same(fourth.json.error.details.map((d: any) => d.field), ['origin']);
  assertEnvelope(t, await rig.call('GET', '/v1/snapshots?origin=bogus', { key: a.key }), 'invalid_request', 400);

  // newest-only delete
  const older = await rig.call('DELETE', `/v1/snapshots/${pending.json.id}`, { key: a.key });
  assertEnvelope(t, older, 'conflict', 409);
  t.match(older.json.error.message, new RegExp(cold.json.id), 'names the snapshot in the way');
  t.equal((await rig.call('DELETE', `/v1/snapshots/${cold.json.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('DELETE', `/v1/snapshots/${waited.json.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('DELETE', `/v1/snapshots/${pending.json.id}`, { key: a.key })).status, 204);
  assertEnvelope(t, await rig.call('GET', `/v1/snapshots/${pending.json.id}`, { key: a.key }), 'not_found', 404);
  t.equal(sub.layers.size, 0, 'every layer pin released');
  t.equal((await eventTypes(rig, m.id)).filter((e) => e === 'snapshot.deleted').length, 3);

  // a failed capture settles error with snapshot.failed, and wait answers 503 naming it
  await rig.call('POST', `/v1/machines/${m.id}/start`, { key: a.key });
  sub.failNext('capture');
  const failed = await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id } });
  assertEnvelope(t, failed, 'compute_unavailable', 503);
  const errId = /snp_[0-9a-z]+/.exec(failed.json.error.message)![0];
  t.match((await rig.call('GET', `/v1/snapshots/${errId}`, { key: a.key })).json, { state: 'error', size_bytes: null });
  // The machine's own events run on beside it (machine.ready follows the start above whenever its readiness probe answers).
  t.equal((await eventTypes(rig, m.id)).filter((e) => e.startsWith('snapshot.')).at(-1), 'snapshot.failed');
  t.equal((await rig.call('DELETE', `/v1/snapshots/${errId}`, { key: a.key })).status, 204, 'an error snapshot can be deleted');
});

t.test('bad input, unknown ids, other organizations, permissions', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const b = await rig.tenant('pro', ALL);
  const m = await machine(rig, a.key);
  const s = (await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id } })).json;

  const bad = await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: 'nope', extra: 1 } });
  assertEnvelope(t, bad, 'invalid_request', 400);
  t.ok(bad.json.error.details.some((d: any) => d.field === 'machine_id'));
  assertEnvelope(t, await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: m.id, name: 'a\nb' } }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', '/v1/snapshots?wait=maybe', { key: a.key, body: { machine_id: m.id } }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: 'mch_' + '0'.repeat(24) } }), 'not_found', 404);
  assertEnvelope(t, await rig.call('GET', '/v1/snapshots/snp_nope', { key: a.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('DELETE', '/v1/snapshots/snp_nope', { key: a.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('POST', '/v1/templates', { key: a.key, body: { name: 'x' } }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', '/v1/templates', { key: a.key, body: { name: 'x', size: 'small', snapshot_id: s.id } }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: {} }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/fork`, { key: a.key, body: { snapshot_id: 'snp_nope' } }), 'not_found', 404);
  assertEnvelope(t, await rig.call('POST', '/v1/machines', { key: a.key, body: { template: 'tpl_nope' } }), 'not_found', 404);

  // another organization sees none of it
  for (const [method, path, body] of [
    ['GET', `/v1/snapshots/${s.id}`], ['DELETE', `/v1/snapshots/${s.id}`], ['POST', '/v1/snapshots', { machine_id: m.id }],
    ['POST', `/v1/machines/${m.id}/fork`, {}], ['POST', `/v1/machines/${m.id}/restore`, { snapshot_id: s.id }],
    ['POST', '/v1/templates', { name: 't', snapshot_id: s.id }], ['POST', '/v1/templates', { name: 't', machine_id: m.id }],
  ] as Array<[string, string, unknown?]>) {
    assertEnvelope(t, await rig.call(method, path, { key: b.key, body }), 'not_found', 404);
  }
  t.equal((await rig.call('GET', '/v1/snapshots', { key: b.key })).json.data.length, 0);
  const tpl = (await rig.call('POST', '/v1/templates', { key: a.key, body: { name: 'img', size: 'small' } })).json;
  assertEnvelope(t, await rig.call('GET', `/v1/templates/${tpl.id}`, { key: b.key }), 'not_found', 404);
  assertEnvelope(t, await rig.call('POST', '/v1/machines', { key: b.key, body: { template: tpl.id } }), 'not_found', 404);

  // permissions: reads need membership; writes their permission
  const reader = await rig.key(a.cookie, ['snapshots:read', 'machines:read']);
  t.equal((await rig.call('GET', `/v1/snapshots/${s.id}`, { key: reader.key })).status, 200);
  assertEnvelope(t, await rig.call('POST', '/v1/snapshots', { key: reader.key, body: { machine_id: m.id } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('DELETE', `/v1/snapshots/${s.id}`, { key: reader.key }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/templates', { key: reader.key, body: { name: 'x', size: 'small' } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/fork`, { key: reader.key, body: {} }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: reader.key, body: { snapshot_id: s.id } }), 'permission_denied', 403);
  const snapOnly = await rig.key(a.cookie, ['snapshots:write']);
  t.equal((await rig.call('POST', '/v1/snapshots?wait=true', { key: snapOnly.key, body: { machine_id: m.id } })).status, 201, 'snapshots:write captures');
  assertEnvelope(t, await rig.call('POST', '/v1/templates', { key: snapOnly.key, body: { name: 'x', size: 'small' } }), 'permission_denied', 403);
});

t.test('restore: lease refusal, Before restore, running comes back running on the restored disk, stopped boots into it', async (t) => {
  const { rig, sub } = await setup(t);
  const a = await rig.tenant('pro', ALL);
  const m = await machine(rig, a.key);
  const disk = () => sub.machines.get(m.id)!.files;
  disk().set('/f', 'captured');
  const s = (await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id, name: 'good' } })).json;
  disk().set('/f', 'changed');

  const sess = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: m.id, type: 'agent' } })).json;
  t.equal((await rig.call('POST', `/v1/machines/${m.id}/input-lease`, { key: a.key, body: { session_id: sess.id } })).status, 200);
  const refused = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: { snapshot_id: s.id } });
  assertEnvelope(t, refused, 'conflict', 409);
  t.match(refused.json.error.message, new RegExp(sess.id), 'names the session holding the lease');
  t.equal(disk().get('/f'), 'changed', 'nothing happened');
  t.equal((await rig.call('DELETE', `/v1/machines/${m.id}/input-lease?session_id=${sess.id}`, { key: a.key })).status, 204);

  const starts = sub.machines.get(m.id)!.starts;
  const mark = (await lifecycle(rig, m.id)).length;
  const r = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: { snapshot_id: s.id } });
  t.equal(r.status, 200);
  t.equal(r.json.state, 'running', 'a running machine comes back running');
  t.equal(sub.machines.get(m.id)!.starts, starts + 1, 'it was restarted onto the disk');
  t.equal(disk().get('/f'), 'captured', 'the file reads back exactly as captured');
  t.same((await lifecycle(rig, m.id)).slice(mark), [
    'machine.restore_started', 'snapshot.started', 'snapshot.completed', 'machine.stopped', 'machine.started', 'machine.restore_completed',
  ]);
  // "Before restore" keeps its name and is one of the spec's three origins: stop (the restore stopped the machine
  // and captured the stopped disk).
  const all = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}`, { key: a.key })).json.data;
  t.same(all.map((x: any) => [x.name, x.origin]), [['good', 'manual'], ['Before restore', 'stop']]);
  const before = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}&origin=stop`, { key: a.key })).json.data;
  t.equal(before.length, 1);
  t.match(before[0], { name: 'Before restore', origin: 'stop', state: 'ready' });
  // the Before restore snapshot holds the disk as it was: restoring onto it brings "changed" back
  await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  const r2 = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: { snapshot_id: before[0].id } });
  t.equal(r2.json.state, 'stopped', 'a stopped machine stays stopped');
  t.equal(disk().get('/f'), 'changed');
  t.equal((await rig.call('POST', `/v1/machines/${m.id}/start`, { key: a.key })).json.state, 'running');

  // a snapshot of another machine, or one not ready, is refused
  const other = await machine(rig, a.key);
  const os = (await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: other.id } })).json;
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: { snapshot_id: os.id } }), 'invalid_request', 400);

  // a capture failure leaves the disk as it was and the machine running
  sub.failNext('capture');
  const failed = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: { snapshot_id: s.id } });
  assertEnvelope(t, failed, 'compute_unavailable', 503);
  t.equal(disk().get('/f'), 'changed');
  t.equal((await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key })).json.state, 'running');
  t.ok((await eventTypes(rig, m.id)).includes('machine.restore_failed'));
});

t.test('fork: from a snapshot or from now; forks survive their parent; quotas as for create', async (t) => {
  const { rig, sub } = await setup(t);
  const a = await rig.tenant('developer', ALL); // 5 machines, 3 running
  const p = await machine(rig, a.key, { name: 'parent', size: 'standard' });
  sub.machines.get(p.id)!.files.set('/f', 'at-snapshot');
  const s = (await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: p.id } })).json;
  if (!s.id) t.comment(`snapshot create answered: ${JSON.stringify(s)}`);
  sub.machines.get(p.id)!.files.set('/f', 'now');

  const f1 = await rig.call('POST', `/v1/machines/${p.id}/fork`, { key: a.key, body: { snapshot_id: s.id, name: 'fork-one' } });
  t.equal(f1.status, 201);
  t.match(f1.json, { name: 'fork-one', state: 'running', size: 'standard' });
  t.equal(sub.machines.get(f1.json.id)!.files.get('/f'), 'at-snapshot', 'the fork stands on the snapshot');
  const f2 = await rig.call('POST', `/v1/machines/${p.id}/fork`, { key: a.key, body: {} });
  t.equal(f2.json.state, 'running');
  t.equal(sub.machines.get(f2.json.id)!.files.get('/f'), 'now', 'without a snapshot: the disk as it is now');
  t.equal((await rig.call('GET', `/v1/snapshots?machine_id=${p.id}`, { key: a.key })).json.data.length, 1, 'a fork from now keeps no snapshot');
  t.match(await eventTypes(rig, f1.json.id), ['machine.created', 'machine.started']);
  t.same([...sub.layers.values()].flatMap((l) => [...l.pins]).sort(), [s.id], 'no pin left but the snapshot\'s');

  t.equal((await rig.call('DELETE', `/v1/machines/${p.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('GET', `/v1/machines/${f1.json.id}`, { key: a.key })).json.state, 'running', 'forks survive their parent');
  t.equal((await rig.call('GET', `/v1/snapshots/${s.id}`, { key: a.key })).json.state, 'ready', 'snapshots survive their machine');
  t.equal((await rig.call('POST', `/v1/machines/${f1.json.id}/exec`, { key: a.key, body: { command: ['true'] } })).status, 200, 'the fork answers');

  const f3 = await rig.call('POST', `/v1/machines/${f1.json.id}/fork`, { key: a.key, body: {} });
  t.equal(f3.status, 201, 'third running machine');
  const over = await rig.call('POST', `/v1/machines/${f1.json.id}/fork`, { key: a.key, body: {} });
  assertEnvelope(t, over, 'quota_exceeded', 402);
  t.same(over.json.error.quota, { limit: 'running_machines', current: 3, maximum: 3, plan_id: 'developer', upgrade_url: null });
});

t.test('templates: from a snapshot, a machine or a size; machines from them; delete leaves them; quotas', async (t) => {
  const { rig, sub } = await setup(t);
  const a = await rig.tenant('developer', ALL); // templates 5, snapshots_per_machine 10
  const m = await machine(rig, a.key, { size: 'standard' });
  sub.machines.get(m.id)!.files.set('/f', 'snap');
  const s = (await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id } })).json;
  sub.machines.get(m.id)!.files.set('/f', 'live');

  const fromSnap = await rig.call('POST', '/v1/templates', { key: a.key, body: { name: 'from snap', snapshot_id: s.id } });
  t.equal(fromSnap.status, 202);
  t.match(fromSnap.json.id, /^tpl_[0-9a-z]{24}$/);
  t.same(Object.keys(fromSnap.json).sort(), ['completed_at', 'created_at', 'id', 'machine_id', 'name', 'size', 'size_bytes', 'snapshot_id', 'source', 'state']);
  const settled = await until('the template', 200, async () => {
    const r = await rig.call('GET', `/v1/templates/${fromSnap.json.id}`, { key: a.key });
    return r.json.state === 'pending' ? null : r.json;
  });
  t.match(settled, { state: 'ready', source: 'snapshot', size: 'standard', snapshot_id: s.id });
  const fromMachine = await rig.call('POST', '/v1/templates?wait=true', { key: a.key, body: { name: 'from machine', machine_id: m.id } });
  t.equal(fromMachine.status, 201);
  t.match(fromMachine.json, { state: 'ready', source: 'machine', machine_id: m.id });
  t.match((await rig.call('GET', `/v1/snapshots/${fromMachine.json.snapshot_id}`, { key: a.key })).json, { origin: 'template', state: 'ready' });
  const image = await rig.call('POST', '/v1/templates', { key: a.key, body: { name: 'plain', size: 'small' } });
  t.equal(image.status, 201, 'a size-only template is ready at once');
  t.match(image.json, { state: 'ready', source: 'image', size: 'small', snapshot_id: null, size_bytes: null });

  const c1 = await rig.call('POST', '/v1/machines', { key: a.key, body: { template: fromSnap.json.id } });
  t.equal(c1.status, 201);
  t.match(c1.json, { template: fromSnap.json.id, size: 'standard', state: 'running' });
  t.equal(sub.machines.get(c1.json.id)!.files.get('/f'), 'snap');
  const c2 = await rig.call('POST', '/v1/machines', { key: a.key, body: { template: fromMachine.json.id, start: false } });
  t.equal(sub.machines.get(c2.json.id)!.files.get('/f'), 'live');
  t.equal(c2.json.state, 'stopped');
  const small = await rig.call('POST', '/v1/machines', { key: a.key, body: { template: fromSnap.json.id, size: 'small' } });
  assertEnvelope(t, small, 'invalid_request', 400);
  const c3 = await rig.call('POST', '/v1/machines', { key: a.key, body: { template: image.json.id, start: false } });
  t.equal(c3.json.size, 'small');
  t.equal(sub.machines.get(c3.json.id)!.source.kind, 'base');

  // deleting the snapshot and the template leaves the machine made from them
  t.equal((await rig.call('DELETE', `/v1/snapshots/${fromMachine.json.snapshot_id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('DELETE', `/v1/snapshots/${s.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('DELETE', `/v1/templates/${fromSnap.json.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('GET', `/v1/machines/${c1.json.id}`, { key: a.key })).json.state, 'running');
  t.equal((await rig.call('POST', '/v1/machines', { key: a.key, body: { template: fromMachine.json.id, start: false } })).status, 201, 'a template outlives its snapshot');

  // templates quota: 5 on developer
  const list = await rig.call('GET', '/v1/templates', { key: a.key });
  t.equal(list.json.data.length, 2);
  for (let i = 0; i < 3; i++) t.equal((await rig.call('POST', '/v1/templates', { key: a.key, body: { name: `t${i}`, size: 'small' } })).status, 201);
  const over = await rig.call('POST', '/v1/templates', { key: a.key, body: { name: 'sixth', size: 'small' } });
  assertEnvelope(t, over, 'quota_exceeded', 402);
  t.same(over.json.error.quota, { limit: 'templates', current: 5, maximum: 5, plan_id: 'developer', upgrade_url: null });
  const limits = Object.fromEntries((await rig.call('GET', '/v1/billing', { cookie: a.cookie })).json.limits.map((l: any) => [l.key, l.current]));
  t.equal(limits.templates, 5, 'templates counted in GET /v1/billing');
});

t.test('snapshots_per_machine quota, counted in billing; billing stop captures origin stop', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('developer', ALL); // 10 per machine
  const m = await machine(rig, a.key);
  const other = await machine(rig, a.key);
  for (let i = 0; i < 10; i++) t.equal((await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id } })).status, 201);
  t.equal((await rig.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: other.id } })).status, 201, 'the limit is per machine');
  const over = await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: m.id } });
  assertEnvelope(t, over, 'quota_exceeded', 402);
  t.same(over.json.error.quota, { limit: 'snapshots_per_machine', current: 10, maximum: 10, plan_id: 'developer', upgrade_url: null });
  // A machine at its limit can still be restored (the spec's only condition is the lease): "Before restore" is
  // taken whatever the count, and counts from then on like any snapshot.
  const tenth = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}`, { key: a.key })).json.data[9].id;
  const rs = await rig.call('POST', `/v1/machines/${m.id}/restore`, { key: a.key, body: { snapshot_id: tenth } });
  t.equal(rs.status, 200, `restored at the limit ${rs.text}`);
  t.equal(rs.json.state, 'running');
  const afterRestore = (await rig.call('GET', `/v1/snapshots?machine_id=${m.id}&limit=100`, { key: a.key })).json.data;
  t.equal(afterRestore.length, 11, 'ten and Before restore');
  t.match(afterRestore[10], { name: 'Before restore', origin: 'stop', state: 'ready' });
  const lim = Object.fromEntries((await rig.call('GET', '/v1/billing', { cookie: a.cookie })).json.limits.map((l: any) => [l.key, l]));
  t.same(lim.snapshots_per_machine, { key: 'snapshots_per_machine', current: 11, limit: 10 });
  const still = await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: m.id } });
  assertEnvelope(t, still, 'quota_exceeded', 402);
  t.same(still.json.error.quota, { limit: 'snapshots_per_machine', current: 11, maximum: 10, plan_id: 'developer', upgrade_url: null }, 'a requested capture still meets the limit');
  // deleting the machine keeps its snapshots, and they keep counting
  t.equal((await rig.call('DELETE', `/v1/machines/${m.id}`, { key: a.key })).status, 204);
  t.equal((await rig.call('GET', `/v1/snapshots?machine_id=${m.id}`, { key: a.key })).json.data.length, 11);
  const lim2 = Object.fromEntries((await rig.call('GET', '/v1/billing', { cookie: a.cookie })).json.limits.map((l: any) => [l.key, l.current]));
  t.equal(lim2.snapshots_per_machine, 11);

  // cancel: running machines are stopped with their disks captured (origin stop), past the quota
  const portal = await rig.call('POST', '/v1/billing/portal', { cookie: a.cookie, body: {} });
  t.equal((await rig.call('POST', `${new URL(portal.json.url).pathname}/cancel`, {})).status, 303);
  for (let i = 0; i < 100 && (await rig.call('GET', `/v1/snapshots?origin=stop&machine_id=${other.id}`, { key: a.key })).json.data[0]?.state !== 'ready'; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal((await rig.call('GET', `/v1/machines/${other.id}`, { key: a.key })).json.state, 'stopped');
  const stops = (await rig.call('GET', `/v1/snapshots?origin=stop&machine_id=${other.id}`, { key: a.key })).json.data;
  t.equal(stops.length, 1);
  t.match(stops[0], { machine_id: other.id, state: 'ready', origin: 'stop' });
  const ev = await eventTypes(rig, other.id);
  t.ok(ev.lastIndexOf('machine.stopped') < ev.lastIndexOf('snapshot.completed'), 'captured after the clean stop');
  assertEnvelope(t, await rig.call('POST', '/v1/snapshots', { key: a.key, body: { machine_id: other.id } }), 'quota_exceeded', 402);
  // A canceled account creates nothing: a restore (it would capture "Before restore") is refused with subscription.
  const mine = (await rig.call('GET', `/v1/snapshots?machine_id=${other.id}&origin=manual`, { key: a.key })).json.data[0].id;
  const canceled = await rig.call('POST', `/v1/machines/${other.id}/restore`, { key: a.key, body: { snapshot_id: mine } });
  assertEnvelope(t, canceled, 'quota_exceeded', 402);
  t.same(canceled.json.error.quota, { limit: 'subscription', current: 0, maximum: 0, plan_id: 'developer', upgrade_url: null });
  t.equal((await rig.call('GET', `/v1/snapshots?machine_id=${other.id}`, { key: a.key })).json.data.length, 2, 'nothing captured');
});

t.test('a crash mid-capture: the next run settles pending snapshots and releases stray pins', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const sub = fake.substrate;
  const rig1 = await makeMachinesRig({ substrate: sub });
  const a = await rig1.tenant('pro', ALL);
  const m = await machine(rig1, a.key);
  // Two captures "in flight" when the process died: one whose layer exists (it finished, its record did not)
  // and one that never produced a layer; plus a pin held for a fork that never completed.
  const done = (await rig1.call('POST', '/v1/snapshots?wait=true', { key: a.key, body: { machine_id: m.id } })).json;
  await rig1.store.db.q().updateTable('snapshots').set({ state: 'pending', layer_id: null, size_bytes: null, completed_at: null }).where('id', '=', done.id).execute();
  // Crash points: after the deciding transaction, before the act (no layer) ...
  const lost = { ...(await rig1.store.snapshots.byId(done.id))!, id: 'snp_' + 'l'.repeat(24), created_at: new Date(Date.now() - 1000).toISOString() };
  await rig1.store.snapshots.insert(lost);
  // ... and in the middle of a fork (its pin taken, the new disk never made).
  const stray = (await sub.capture(m.id, 'mch_strayforkholder0000000000')).layerId;
  await rig1.close({ keepDir: true });

  const rig2 = await makeMachinesRig({ substrate: sub, dir: rig1.dir });
  t.teardown(async () => {
    fake.close();
    await rig2.close();
  });
  await rig2.services.machines.reconcile();
  const get = async (id: string) => (await rig2.call('GET', `/v1/snapshots/${id}`, { key: a.key })).json;
  t.match(await get(done.id), { state: 'ready' }, 'a capture whose layer exists is ready');
  t.match(await get(lost.id), { state: 'error' }, 'a capture with no layer is error, not pending forever');
  t.notOk(sub.layers.has(stray), 'a pin whose holder never settled is released');
  t.same([...sub.layers.values()].flatMap((l) => [...l.pins]), [done.id], 'only the ready snapshot holds a layer');
  t.same((await lifecycle(rig2, m.id)).slice(-2).sort(), ['snapshot.completed', 'snapshot.failed'], 'each settled with its event');
});

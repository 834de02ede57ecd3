/**
 * The substrate watch's decisions (services/machines/watch.ts watchPass) on the fake substrate: a crashed guest →
 * error + machine.failed, a clean guest shutdown → stopped + machine.stopped, a running guest untouched, and a
 * user's stop decided first always wins (no event from the watch, no second transition). A read-only disk
 * volume (the two optional substrate calls on the fake): recovery waits for acts in flight, a failed remount
 * leaves the machines stopped until the next pass, only machines it stopped are started again.
 */
import t, { type Test } from 'tap';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { makeMachinesRig, type MachinesRig } from '../helpers/machines-rig.js';

async function createMachine(t: Test, rig: MachinesRig, key: string, name: string, start = true): Promise<string> {
  const r = await rig.call('POST', '/v1/machines', { key, body: { name, start } });
  t.equal(r.status, 201, r.text);
  return r.json.id as string;
}

t.test('substrate watch', async (t) => {
  const fake = new FakeSubstrate();
  const rig = await makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const make = (name: string) => createMachine(t, rig, key, name);
  const types = async (id: string) =>
    ((await rig.call('GET', `/v1/machines/${id}/events`, { key })).json.data as Array<{ type: string; data: any }>).reverse();
  const state = async (id: string) => (await rig.store.machines.byId(id))!.state;

  const crashed = await make('crashed');
  const clean = await make('clean');
  const alive = await make('alive');
  fake.exitFromOutside(crashed, 'crashed');
  fake.exitFromOutside(clean, 'shutdown');
  const moved = await rig.services.machines.watchPass();
  t.same(moved.sort((a, b) => a.id.localeCompare(b.id)), [{ id: crashed, to: 'error' }, { id: clean, to: 'stopped' }].sort((a, b) => a.id.localeCompare(b.id)));
  t.equal((await state(crashed)), 'error');
  t.match((await types(crashed)).at(-1), { type: 'machine.failed', data: { from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: 'exited' } });
  t.equal((await state(clean)), 'stopped');
  t.match((await types(clean)).at(-1), { type: 'machine.stopped', data: { from: 'running', to: 'stopped', reason: 'guest_shutdown' } });
  t.equal((await state(alive)), 'running');
  t.same(await rig.services.machines.watchPass(), [], 'a second pass finds nothing');

  t.equal((await rig.call('POST', `/v1/machines/${crashed}/start`, { key })).status, 200, 'start from error');
  t.equal((await state(crashed)), 'running');

  // The watch has read the row and is probing (slowly) when a user's stop is decided: the stop's act takes the
  // disk lock first, and the watch's compare-and-set then finds the row moved.
  fake.setDelay('liveness', 300);
  fake.exitFromOutside(alive, 'crashed');
  const pass = rig.services.machines.watchPass();
  const stop = await rig.call('POST', `/v1/machines/${alive}/stop`, { key });
  t.equal(stop.status, 200);
  t.same(await pass, [], 'the watch reported nothing');
  fake.setDelay('liveness', 0);
  t.equal((await state(alive)), 'stopped');
  t.notOk((await types(alive)).some((e) => e.type === 'machine.failed'), 'no machine.failed after a user stop');
});

t.test('a substrate that stops answering: host.unhealthy once per episode', async (t) => {
  const fake = new FakeSubstrate();
  const rig = await makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const id = (await rig.call('POST', '/v1/machines', { key, body: { name: 'm' } })).json.id as string;
  const unhealthy = async () =>
    ((await rig.call('GET', `/v1/machines/${id}/events`, { key })).json.data as Array<{ type: string; data: any }>).filter((e) => e.type === 'host.unhealthy');
  fake.failNext('liveness');
  await rig.services.machines.watchPass();
  fake.failNext('liveness');
  await rig.services.machines.watchPass();
  t.match(await unhealthy(), [{ data: { reason: 'substrate_unavailable' } }], 'once for two failed passes');
  t.equal((await unhealthy()).length, 1);
  await rig.services.machines.watchPass();
  fake.failNext('liveness');
  await rig.services.machines.watchPass();
  t.equal((await unhealthy()).length, 2, 'again after it answered in between');
  t.equal((await rig.store.machines.byId(id))!.state, 'running', 'a probe failure moves no machine');
});

/** The fake has no volume: the two optional substrate calls are added to this instance, driven by the test. */
function fakeVolume(fake: FakeSubstrate) {
  const vol = { readOnly: false, remountFails: 0, remounts: [] as string[] };
  Object.assign(fake, {
    diskVolume: () => ({ readOnly: vol.readOnly, backingDir: '/nonexistent-backing-dir' }),
    remountDiskVolume: async () => {
      if (vol.remountFails > 0) {
        vol.remountFails--;
        vol.remounts.push('failed');
        throw new Error('umount: target is busy');
      }
      vol.remounts.push('ok');
      vol.readOnly = false;
    },
  });
  return vol;
}

t.test('a read-only disk volume: recovery waits for acts in flight, survives a failed remount, keeps stopped machines stopped', async (t) => {
  const fake = new FakeSubstrate();
  const vol = fakeVolume(fake);
  const { remounts } = vol;
  const rig = await makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const make = (name: string, start = true) => createMachine(t, rig, key, name, start);
  const events = async (id: string) =>
    ((await rig.call('GET', `/v1/machines/${id}/events?limit=100`, { key })).json.data as Array<{ type: string; data: any }>).reverse();
  const state = async (id: string) => (await rig.store.machines.byId(id))!.state;
  const running = await make('running');
  const resting = await make('resting', false);
  const booting = await make('booting', false);

  // A start decided before the volume failed is still in flight: the recovery waits for it.
  fake.setDelay('start', 400);
  const inFlight = rig.call('POST', `/v1/machines/${booting}/start`, { key });
  await new Promise((r) => setTimeout(r, 50));
  vol.readOnly = true;
  vol.remountFails = 1;
  await rig.services.machines.watchPass();
  t.same(remounts, [], 'no recovery while a start is in flight');
  t.equal((await state(running)), 'running');
  t.equal((await inFlight).status, 200, 'the start in flight completes');
  fake.setDelay('start', 0);

  // Space is there (the backing directory cannot be read: not low), nothing in flight: stop, remount (fails).
  await rig.services.machines.watchPass();
  t.same(remounts, ['failed']);
  t.equal((await state(running)), 'stopped', 'stopped, honestly, while the volume could not be mounted again');
  t.equal((await state(booting)), 'stopped');
  const refused = await rig.call('POST', `/v1/machines/${running}/start`, { key });
  t.equal(refused.status, 503, 'a user start is refused while read-only');
  t.equal(refused.headers.get('retry-after'), '30');

  // The next pass mounts it and starts again exactly the machines it stopped.
  await rig.services.machines.watchPass();
  t.same(remounts, ['failed', 'ok']);
  for (const id of [running, booting]) {
    t.equal((await state(id)), 'running');
    t.same((await events(id)).filter((e) => e.type === 'host.unhealthy').map((e) => e.data), [{ reason: 'disk_read_only' }]);
    t.match((await events(id)).filter((e) => ['machine.stopped', 'machine.started'].includes(e.type)).slice(-2), [
      { type: 'machine.stopped', data: { from: 'stopping', to: 'stopped', reason: 'disk_read_only' } },
      { type: 'machine.started', data: { from: 'starting', to: 'running', reason: 'host_recovered' } },
    ]);
  }
  t.equal((await state(resting)), 'stopped', 'a machine that was stopped stays stopped');
  t.same((await events(resting)).filter((e) => e.type === 'host.unhealthy').map((e) => e.data), [{ reason: 'disk_read_only' }]);
  t.same(await rig.services.machines.watchPass(), []);
  t.same(remounts, ['failed', 'ok'], 'nothing more once the volume is writable');

  // A second episode where the start after the remount fails: stopped, with the cause, never error.
  vol.readOnly = true;
  fake.failNext('start');
  await rig.services.machines.watchPass();
  const states = await Promise.all([running, booting].map(state));
  const failedStart = [running, booting].filter((_, i) => states[i] === 'stopped');
  t.equal(failedStart.length, 1, 'one start failed');
  t.match((await events(failedStart[0]!)).at(-1), { type: 'machine.stopped', data: { reason: 'host_recovered', restarted: false, code: 'compute_unavailable' } });
  t.equal((await rig.call('POST', `/v1/machines/${failedStart[0]}/start`, { key })).status, 200, 'and a start works');
  t.equal((await events(running)).filter((e) => e.type === 'host.unhealthy').length, 2, 'host.unhealthy once per episode');
});

t.test('a read-only disk volume: the starts a recovery owes survive a control-plane restart', async (t) => {
  const fake = new FakeSubstrate();
  const vol = fakeVolume(fake);
  let rig = await makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
  const dir = rig.dir;
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const make = (name: string) => createMachine(t, rig, key, name);
  const a = await make('a');
  const b = await make('b');
  vol.readOnly = true;
  vol.remountFails = 1;
  await rig.services.machines.watchPass();
  t.same(await Promise.all([a, b].map(async (id) => (await rig.store.machines.byId(id))!.state)), ['stopped', 'stopped'], 'stopped; the remount failed');

  // The control plane goes away before the volume is back; the next one finds what it owes in the store.
  await rig.close({ keepDir: true });
  rig = await makeMachinesRig({ substrate: fake, dir, services: { readyProbe: false } });
  await rig.services.machines.reconcile();
  t.same(await Promise.all([a, b].map(async (id) => (await rig.store.machines.byId(id))!.state)), ['stopped', 'stopped'], 'resting until the volume is back');
  await rig.services.machines.watchPass();
  t.equal(vol.readOnly, false, 'mounted again');
  t.same(await Promise.all([a, b].map(async (id) => (await rig.store.machines.byId(id))!.state)), ['running', 'running'], 'both started again by the new control plane');
  t.same(await rig.store.volumeRestarts.all(), [], 'nothing more owed');
});

t.test('a machine found frozen with no capture in flight: thawed and left running, or failed when it cannot be', async (t) => {
  const fake = new FakeSubstrate();
  // The fake freezes nothing: its liveness and the optional thaw are driven by the test on this instance.
  const frozen = new Set<string>();
  const thaws: string[] = [];
  let thawFails = false;
  const liveness = fake.liveness.bind(fake);
  Object.assign(fake, {
    liveness: async (id: string) => (frozen.has(id) ? 'frozen' : liveness(id)),
    thaw: async (id: string) => {
      thaws.push(id);
      if (thawFails) throw new Error('freezer.state: no such file');
      frozen.delete(id);
    },
  });
  const rig = await makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const events = async (id: string) =>
    ((await rig.call('GET', `/v1/machines/${id}/events?limit=100`, { key })).json.data as Array<{ type: string; data: any }>).reverse();
  const a = await createMachine(t, rig, key, 'a');
  const b = await createMachine(t, rig, key, 'b');

  frozen.add(a);
  t.same(await rig.services.machines.watchPass(), [], 'nothing moved');
  t.same(thaws, [a], 'thawed once');
  t.equal((await rig.store.machines.byId(a))!.state, 'running');
  t.notOk((await events(a)).some((e) => e.type === 'machine.failed'), 'no machine.failed: it runs on');
  t.same(await rig.services.machines.watchPass(), [], 'the next pass finds it running');
  t.same(thaws, [a]);

  frozen.add(b);
  thawFails = true;
  t.same(await rig.services.machines.watchPass(), [{ id: b, to: 'error' }], 'one that cannot be thawed answers nothing: it fails');
  t.match((await events(b)).at(-1), { type: 'machine.failed', data: { from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: 'frozen' } });
});

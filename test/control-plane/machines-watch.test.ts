/**
 * The substrate watch's decisions (services/machines.ts watchPass) on the fake substrate: a crashed guest →
 * error + machine.failed, a clean guest shutdown → stopped + machine.stopped, a running guest untouched, and a
 * user's stop decided first always wins (no event from the watch, no second transition).
 */
import t from 'tap';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';

t.test('substrate watch', async (t) => {
  const fake = new FakeSubstrate();
  const rig = makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const make = async (name: string) => {
    const r = await rig.call('POST', '/v1/machines', { key, body: { name } });
    t.equal(r.status, 201, r.text);
    return r.json.id as string;
  };
  const types = async (id: string) =>
    ((await rig.call('GET', `/v1/machines/${id}/events`, { key })).json.data as Array<{ type: string; data: any }>).reverse();
  const state = (id: string) => rig.store.machines.byId(id)!.state;

  const crashed = await make('crashed');
  const clean = await make('clean');
  const alive = await make('alive');
  fake.exitFromOutside(crashed, 'crashed');
  fake.exitFromOutside(clean, 'shutdown');
  const moved = await rig.services.machines.watchPass();
  t.same(moved.sort((a, b) => a.id.localeCompare(b.id)), [{ id: crashed, to: 'error' }, { id: clean, to: 'stopped' }].sort((a, b) => a.id.localeCompare(b.id)));
  t.equal(state(crashed), 'error');
  t.match((await types(crashed)).at(-1), { type: 'machine.failed', data: { from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: 'exited' } });
  t.equal(state(clean), 'stopped');
  t.match((await types(clean)).at(-1), { type: 'machine.stopped', data: { from: 'running', to: 'stopped', reason: 'guest_shutdown' } });
  t.equal(state(alive), 'running');
  t.same(await rig.services.machines.watchPass(), [], 'a second pass finds nothing');

  t.equal((await rig.call('POST', `/v1/machines/${crashed}/start`, { key })).status, 200, 'start from error');
  t.equal(state(crashed), 'running');

  // The watch has read the row and is probing (slowly) when a user's stop is decided: the stop's act takes the
  // disk lock first, and the watch's compare-and-set then finds the row moved.
  fake.setDelay('liveness', 300);
  fake.exitFromOutside(alive, 'crashed');
  const pass = rig.services.machines.watchPass();
  const stop = await rig.call('POST', `/v1/machines/${alive}/stop`, { key });
  t.equal(stop.status, 200);
  t.same(await pass, [], 'the watch reported nothing');
  fake.setDelay('liveness', 0);
  t.equal(state(alive), 'stopped');
  t.notOk((await types(alive)).some((e) => e.type === 'machine.failed'), 'no machine.failed after a user stop');
});

t.test('a substrate that stops answering: host.unhealthy once per episode', async (t) => {
  const fake = new FakeSubstrate();
  const rig = makeMachinesRig({ substrate: fake, services: { readyProbe: false } });
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
  t.equal(rig.store.machines.byId(id)!.state, 'running', 'a probe failure moves no machine');
});

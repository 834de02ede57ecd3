/**
 * The warm pool (services/machines/warm-pool.ts) on the fake substrate with in-process agents, over a real
 * SQLite store: what fills it (demand, capped), which creates take a member, that a member belongs to no
 * organization (list, quota counts, usage) until a create takes it, and what the start-up reconcile does with
 * what a killed control plane's pool left. The pool's decisions are checked literally (domain/warm-pool.ts).
 * Real containers: test/security/warm-pool-isolation.test.ts.
 */
import path from 'node:path';
import t, { type Test } from 'tap';
import { poolEligible, poolLeftover, poolStep, poolTarget } from '../../control-plane/src/domain/warm-pool.js';
import { fileLedger } from '../../control-plane/src/services/machines/pool-ledger.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig, type MachinesRig } from '../helpers/machines-rig.js';

const HOST_OK = { diskLow: false, roomForOne: true, overCommitted: false };

t.test('decisions: target from demand, capped; steps; which creates are eligible', async (t) => {
  t.equal(poolTarget(0, 2), 0, 'no demand, no members');
  t.equal(poolTarget(1, 2), 1);
  t.equal(poolTarget(5, 2), 2, 'capped');
  t.equal(poolTarget(5, 0), 0, '0 disables');
  t.same(poolStep(1, 0, HOST_OK), { do: 'fill' });
  t.same(poolStep(1, 1, HOST_OK), { do: 'nothing' });
  t.same(poolStep(0, 2, HOST_OK), { do: 'drain', n: 2 }, 'demand gone: members go');
  t.same(poolStep(1, 0, { ...HOST_OK, roomForOne: false }), { do: 'nothing' }, 'no room: no fill');
  t.same(poolStep(2, 2, { ...HOST_OK, overCommitted: true }), { do: 'drain', n: 1 }, 'tenants need the room: one goes per pass');
  t.same(poolStep(2, 2, { ...HOST_OK, diskLow: true }), { do: 'drain', n: 2 }, 'below the disk reserve: all go');
  t.same(poolStep(2, 0, { ...HOST_OK, diskLow: true }), { do: 'nothing' });
  t.equal(poolEligible({ start: true }), true, 'a plain create');
  t.equal(poolEligible({ start: true, template: 'tpl_x' }), false, "a template's disk is not the base image");
  t.equal(poolEligible({ start: false }), false, 'a stopped create wants no running machine');
  t.equal(poolLeftover(true), 'forget', "a previous run's member a row took is the tenant's");
  t.equal(poolLeftover(false), 'destroy', 'one no row took is destroyed');
});

async function pooledRig(t: Test, dir?: string) {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate, env: { WARM_POOL_PER_SIZE: '1' }, services: { warmPool: { tickMs: 3_600_000 } }, ...(dir ? { dir } : {}) });
  t.teardown(async () => {
    fake.close();
    await rig.close();
  });
  return { fake, rig, pool: rig.services.machines.warmPool };
}

const ids = async (rig: MachinesRig, key: string) => ((await rig.call('GET', '/v1/machines', { key })).json.data as Array<{ id: string }>).map((m) => m.id);
const counted = async (rig: MachinesRig, key: string) =>
  Object.fromEntries(((await rig.call('GET', '/v1/billing', { key })).json.limits as Array<{ key: string; current: number }>).map((l) => [l.key, l.current]));

t.test('a member belongs to no organization until a plain create takes it', async (t) => {
  const { fake, rig, pool } = await pooledRig(t);
  const a = await rig.tenant('pro');
  const b = await rig.tenant('pro');
  pool.start();
  await pool.tick();
  t.same(pool.ready(), { small: [], standard: [], large: [] }, 'nothing demanded, nothing started');

  const first = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  t.ok(fake.substrate.calls.includes(`create:${first.id}`), 'the first create booted (cold)');
  await pool.tick();
  const [member] = pool.ready().small!;
  t.ok(member, 'one small member after one small create');
  t.equal(fake.substrate.machines.get(member!)?.state, 'running', 'started');
  t.equal((await rig.store.machines.byId(member!)), undefined, 'no row: no organization holds it');
  t.same(await ids(rig, a.key), [first.id], "not in A's list");
  t.same(await ids(rig, b.key), [], "not in B's list");
  t.same(await counted(rig, b.key), { machines: 0, running_machines: 0, members: 1, templates: 0, concurrent_sessions: 0, snapshots_per_machine: 0 }, "not in B's quota counts");
  t.same(await counted(rig, a.key), { machines: 1, running_machines: 1, members: 1, templates: 0, concurrent_sessions: 0, snapshots_per_machine: 0 }, "A's counts are A's machine only");
  await rig.services.metering.flush();
  const metered = (await rig.store.db.q().selectFrom('usage_records').select('machine_id').execute()).map((r) => r.machine_id);
  t.notOk(metered.includes(member!), 'no usage is recorded for a member');

  // Not from the pool: a stopped create, and a create of another size.
  const stopped = (await rig.call('POST', '/v1/machines', { key: b.key, body: { start: false } })).json;
  t.not(stopped.id, member, 'start:false does not take a running member');
  const standard = (await rig.call('POST', '/v1/machines', { key: b.key, body: { size: 'standard' } })).json;
  t.not(standard.id, member, 'another size does not take it');
  t.same(pool.ready().small, [member], 'still the pool\'s');

  const callsOf = (id: string) => fake.substrate.calls.filter((c) => c.endsWith(`:${id}`) && !c.startsWith('openChannel') && !c.startsWith('liveness'));
  t.same(callsOf(member!), [`create:${member}`, `start:${member}`], 'the pool booted it');
  const taken = await rig.call('POST', '/v1/machines', { key: b.key, body: { name: 'warm-one', metadata: { team: 'b' } } });
  t.equal(taken.status, 201);
  t.equal(taken.json.id, member, 'the plain create took the member');
  t.equal(taken.json.state, 'running');
  t.same(taken.json.metadata, { team: 'b' }, "the tenant's metadata");
  t.same(callsOf(member!), [`create:${member}`, `start:${member}`], 'nothing booted it again at the take');
  t.notOk(pool.ready().small!.includes(member!), 'no longer the pool\'s');
  const events = (await rig.call('GET', `/v1/machines/${member}/events`, { key: b.key })).json.data.map((e: { type: string }) => e.type);
  t.same(events.filter((e: string) => e !== 'machine.ready').sort(), ['machine.created', 'machine.started'], 'its log starts at the take');
  const display = await rig.call('GET', `/v1/machines/${member}/display`, { key: b.key });
  t.equal(display.status, 200, "its agent answers with B's key, enrolled at the first call");
  t.equal((await rig.call('GET', `/v1/machines/${member}`, { key: a.key })).status, 404, "A cannot see B's machine");
  t.notOk(fileLedger(path.join(rig.dir, 'warm-pool.json')).all().some((e) => e.id === member), 'the ledger let go of it');

  await pool.tick();
  await pool.tick();
  const [next] = pool.ready().small!;
  t.ok(next && next !== member, 'refilled with a new member');
  t.same((await ids(rig, b.key)).sort(), [member, standard.id, stopped.id].sort(), "B's list: B's machines only");
});

t.test('the start-up reconcile destroys what a killed run\'s pool left, and leaves what a row took', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate, env: { WARM_POOL_PER_SIZE: '1' }, services: { warmPool: { tickMs: 3_600_000 } } });
  t.teardown(() => fake.close());
  const a = await rig.tenant('pro');
  rig.services.machines.warmPool.start();
  await rig.call('POST', '/v1/machines', { key: a.key, body: {} });
  await rig.services.machines.warmPool.tick();
  const [left] = rig.services.machines.warmPool.ready().small!;
  const took = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json.id as string;
  t.equal(took, left, 'taken');
  await rig.services.machines.warmPool.tick();
  const [orphan] = rig.services.machines.warmPool.ready().small!;
  t.ok(orphan);
  // Killed between the take's transaction and the ledger's update: the ledger still names the taken machine.
  fileLedger(path.join(rig.dir, 'warm-pool.json')).add({ id: took, size: 'small' });
  // The control plane is killed (no drain); the next one opens the same data directory.
  await rig.services.pool.close();
  await rig.store.db.close();
  const again = await makeMachinesRig({ substrate: fake.substrate, dir: rig.dir, env: { WARM_POOL_PER_SIZE: '1' } });
  t.teardown(() => again.close());
  await again.services.machines.reconcile();
  t.equal(fake.substrate.machines.has(orphan!), false, 'the untaken member was destroyed');
  t.equal(fake.substrate.machines.get(took)?.state, 'running', "the taken one is the tenant's, untouched");
  t.equal((await again.store.machines.byId(took))?.state, 'running');
  t.same(fileLedger(path.join(again.dir, 'warm-pool.json')).all(), [], 'the ledger is empty');
});

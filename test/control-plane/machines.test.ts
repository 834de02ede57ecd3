/**
 * Machines API through /v1 with the fake substrate (channels served by the real agent app): lifecycle
 * and its transition table, concurrent conflicting calls, quotas, events, cross-org isolation, leaks.
 */
import t, { type Test } from 'tap';
import { TRANSITIONS } from '../../control-plane/src/domain/machine-lifecycle.js';
import { EVENT_TYPES, type MachineState } from '../../shared/schemas/machine.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { fakeAgentsRig, fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig, until, type MachinesRig } from '../helpers/machines-rig.js';
import { TEST_ENGINE } from '../helpers/rig-db.js';

/** Resolves once the substrate act `call` (`op:id`) has begun: its decision is recorded by then. */
async function actBegun(calls: readonly string[], call: string): Promise<void> {
  while (!calls.includes(call)) await new Promise((r) => setTimeout(r, 1));
}

function setup(t: Test) {
  return fakeAgentsRig(t);
}

/** No response ever carried a guest token or a substrate address. */
async function assertNoLeaks(t: Test, rig: MachinesRig) {
  const tokens = (await rig.store.db.q().selectFrom('machines').select('agent_token').execute()).map((r) => r.agent_token);
  t.ok(tokens.length > 0, 'there were machines');
  const all = rig.bodies.join('\n');
  for (const tok of tokens) t.notOk(all.includes(tok), 'no response contains a guest token');
  t.notOk(all.includes('fake://'), 'no response contains a channel address');
  t.notOk(all.includes('agent_token'), 'no response names the token field');
  t.notOk(/\/tmp\/|\/var\/lib\//.test(all), 'no response contains a host path');
}

t.test('lifecycle through /v1 follows the transition table', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro');
  const create = await rig.call('POST', '/v1/machines', { key: a.key, body: { metadata: { team: 'qa', 'x-y': 'v'.repeat(1024) } } });
  t.equal(create.status, 201);
  const m = create.json;
  t.match(m.id, /^mch_[0-9a-z]{20,32}$/);
  t.equal(m.state, 'running', 'create returns once running');
  t.match(m.name, /^[a-z0-9-]+$/, 'generated name');
  t.same(m.metadata, { team: 'qa', 'x-y': 'v'.repeat(1024) }, 'metadata echoed unchanged');
  t.equal(m.size, 'small');
  t.same(Object.keys(m).sort(), ['created_at', 'id', 'metadata', 'name', 'region', 'size', 'state', 'state_changed_at', 'template', 'updated_at']);
  t.equal(fake.substrate.machines.get(m.id)?.state, 'running');
  t.equal(fake.substrate.machines.get(m.id)?.network, 'outbound', 'MACHINE_NETWORK defaults to outbound');

  const bad = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'Bad_Name', metadata: { ['k'.repeat(65)]: 'v' } } });
  assertEnvelope(t, bad, 'invalid_request', 400);
  t.ok(bad.json.error.details.some((d: any) => d.field === 'name'));
  t.ok(bad.json.error.details.some((d: any) => d.field.startsWith('metadata')));

  const stopped = await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  t.equal(stopped.status, 200);
  t.equal(stopped.json.state, 'stopped');
  const again = await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  assertEnvelope(t, again, 'conflict', 409);
  t.match(again.json.error.message, /stopped/, 'names the current state');
  t.match(again.json.error.message, /running/, 'names the state it needed');

  const started = await rig.call('POST', `/v1/machines/${m.id}/start`, { key: a.key });
  t.equal(started.json.state, 'running');
  const restarted = await rig.call('POST', `/v1/machines/${m.id}/restart`, { key: a.key });
  t.equal(restarted.json.state, 'running');
  t.equal(fake.substrate.machines.get(m.id)!.starts, 3, 'restart is a stop and a start');

  const patched = await rig.call('PATCH', `/v1/machines/${m.id}`, { key: a.key, body: { name: 'renamed-1', metadata: { a: 'b' } } });
  t.equal(patched.json.name, 'renamed-1');
  t.same(patched.json.metadata, { a: 'b' });
  const dup = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'renamed-1', start: false } });
  assertEnvelope(t, dup, 'conflict', 409);

  // born stopped
  const cold = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'cold', start: false, region: 'eu-west' } });
  t.equal(cold.json.state, 'stopped');
  t.equal(cold.json.region, 'eu-west');
  t.equal(fake.substrate.machines.get(cold.json.id)?.state, 'stopped');

  // list pagination
  const p1 = await rig.call('GET', '/v1/machines?limit=1', { key: a.key });
  t.equal(p1.json.data.length, 1);
  t.type(p1.json.next_cursor, 'string');
  const p2 = await rig.call('GET', `/v1/machines?limit=1&cursor=${p1.json.next_cursor}`, { key: a.key });
  t.equal(p2.json.data.length, 1);
  t.not(p2.json.data[0].id, p1.json.data[0].id);
  t.equal(p2.json.next_cursor, null);
  const onlyStopped = await rig.call('GET', '/v1/machines?state=stopped', { key: a.key });
  t.same(onlyStopped.json.data.map((x: any) => x.id), [cold.json.id]);
  assertEnvelope(t, await rig.call('GET', '/v1/machines?cursor=zzz', { key: a.key }), 'invalid_request', 400);

  // substrate failure → error + machine.failed; error is a rest state left by start or delete
  fake.substrate.failNext('start');
  const failed = await rig.call('POST', `/v1/machines/${cold.json.id}/start`, { key: a.key });
  assertEnvelope(t, failed, 'compute_unavailable', 503);
  t.equal((await rig.call('GET', `/v1/machines/${cold.json.id}`, { key: a.key })).json.state, 'error');
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${cold.json.id}/stop`, { key: a.key }), 'conflict', 409);
  t.equal((await rig.call('POST', `/v1/machines/${cold.json.id}/start`, { key: a.key })).json.state, 'running', 'start leaves error');

  // delete
  t.equal((await rig.call('DELETE', `/v1/machines/${cold.json.id}`, { key: a.key })).status, 204);
  assertEnvelope(t, await rig.call('GET', `/v1/machines/${cold.json.id}`, { key: a.key }), 'not_found', 404);
  t.notOk(fake.substrate.machines.has(cold.json.id), 'disk destroyed');

  // events: newest first, cursor-paginated, closed set
  const ev = await rig.call('GET', `/v1/machines/${m.id}/events?limit=3`, { key: a.key });
  t.equal(ev.status, 200);
  t.equal(ev.json.data.length, 3);
  t.ok(Date.parse(ev.json.data[0].created_at) >= Date.parse(ev.json.data[2].created_at), 'newest first');
  // machine.ready is recorded in the background once the desktop answers.
  for (let i = 0; i < 200 && !(await rig.store.db.q().selectFrom('machine_events').select('seq').where('machine_id', '=', m.id).where('type', '=', 'machine.ready').executeTakeFirst()); i++) {
    await new Promise((r) => setTimeout(r, 25));
  }
  const types: string[] = [];
  let cursor: string | null = null;
  do {
    const page: any = await rig.call('GET', `/v1/machines/${m.id}/events?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { key: a.key });
    types.push(...page.json.data.map((e: any) => e.type));
    for (const e of page.json.data) t.type(e.created_at, 'string');
    cursor = page.json.next_cursor;
  } while (cursor);
  t.ok(types.includes('machine.ready'), 'machine.ready once the desktop answered');
  t.same(types.reverse().filter((x) => x !== 'machine.ready'), [
    'machine.created', 'machine.started', 'machine.stopped', 'machine.started', 'machine.stopped', 'machine.started', 'machine.updated',
  ]);
  t.ok(types.every((x) => (EVENT_TYPES as readonly string[]).includes(x)), 'closed set');
  const failEvents = (await rig.call('GET', `/v1/machines/${cold.json.id}/events`, { key: a.key }));
  t.equal(failEvents.status, 404, 'a deleted machine has no event log');
  const failedRow = await rig.store.db.q().selectFrom('machine_events').select(['type', 'data']).where('machine_id', '=', cold.json.id).where('type', '=', 'machine.failed').execute();
  t.equal(failedRow.length, 1, 'machine.failed recorded');
  t.match(JSON.parse(failedRow[0]!.data), { operation: 'start', code: 'compute_unavailable' });

  await assertNoLeaks(t, rig);
});

t.test('every refused move of the transition table answers 409 through the API', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro');
  const routes: Record<string, { method: string; path: (id: string) => string; trigger: string }> = {
    stop: { method: 'POST', path: (id) => `/v1/machines/${id}/stop`, trigger: 'stop' },
    start: { method: 'POST', path: (id) => `/v1/machines/${id}/start`, trigger: 'start' },
    restart: { method: 'POST', path: (id) => `/v1/machines/${id}/restart`, trigger: 'restart' },
    delete: { method: 'DELETE', path: (id) => `/v1/machines/${id}`, trigger: 'delete' },
  };
  // Put a machine in each rest state the API can reach, then try every route from it.
  for (const state of ['running', 'stopped', 'error'] as const) {
    for (const [name, r] of Object.entries(routes)) {
      const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { start: state !== 'stopped' } })).json;
      if (state === 'error') {
        fake.substrate.failNext('stop');
        await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
      }
      t.equal((await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key })).json.state, state);
      const legal = TRANSITIONS.some((x) => x.from === state && x.trigger === r.trigger);
      const res = await rig.call(r.method, r.path(m.id), { key: a.key });
      if (legal) t.ok(res.status === 200 || res.status === 204, `${name} from ${state} allowed`);
      else {
        assertEnvelope(t, res, 'conflict', 409);
        t.match(res.json.error.message, new RegExp(state), `${name} from ${state} names the state`);
      }
      const still = await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key });
      if (still.status === 200 && still.json.state !== 'deleting') await rig.call('DELETE', `/v1/machines/${m.id}`, { key: a.key });
    }
  }
  // Transient states refuse every move but delete (the stored state is read, not the requested one).
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  let release = fake.substrate.hold('stop');
  const stopping = rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  await actBegun(fake.substrate.calls, `stop:${m.id}`);
  t.equal((await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key })).json.state, 'stopping');
  for (const [name, r] of Object.entries(routes)) {
    if (name === 'delete') continue;
    const res = await rig.call(r.method, r.path(m.id), { key: a.key });
    assertEnvelope(t, res, 'conflict', 409);
    t.match(res.json.error.message, /stopping/, `${name} while stopping names it`);
  }
  release();
  t.equal((await stopping).json.state, 'stopped');

  // A delete during a transient state wins; the act in flight finishes first, then reports the row moved.
  const m2 = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  release = fake.substrate.hold('stop');
  const stopping2 = rig.call('POST', `/v1/machines/${m2.id}/stop`, { key: a.key });
  await actBegun(fake.substrate.calls, `stop:${m2.id}`);
  // The delete is recorded at once and its destroy waits on the disk lock the stop holds: release the stop then.
  const deleting = rig.call('DELETE', `/v1/machines/${m2.id}`, { key: a.key });
  await until('the delete recorded', 120, async () =>
    (await rig.call('GET', `/v1/machines/${m2.id}`, { key: a.key })).json?.state === 'deleting' ? true : null);
  release();
  const del = await deleting;
  t.equal(del.status, 204, 'delete while stopping is allowed');
  const lost = await stopping2;
  assertEnvelope(t, lost, 'conflict', 409);
  t.match(lost.json.error.message, /deleting|deleted/, 'the stop in flight reports that the machine was deleted under it');
  const calls = fake.substrate.calls.filter((c) => c.endsWith(m2.id)).map((c) => c.split(':')[0]);
  t.same(calls.slice(-2), ['stop', 'destroy'], 'the destroy came after the stop it raced');
  t.equal((await rig.call('GET', `/v1/machines/${m2.id}`, { key: a.key })).status, 404);
});

// On SQLite the two calls of a round always overlap (one connection, each query in turn); on PostgreSQL through one
// in-process app they need not (one may finish before the other starts, so 204 then 404 is right): the race across
// processes, with overlap forced by a held table lock as test/control-plane/guarantees/ does, needs the forward to
// the machine's host first (each process has its own substrate): not proven yet (docs/operations.md).
t.test('1,000 rounds of concurrent conflicting lifecycle calls: exactly one winner each', { skip: TEST_ENGINE === 'postgres' ? 'overlap is not guaranteed through one app on PostgreSQL' : false }, async (t) => {
  const { rig, fake } = await setup(t);
  fake.substrate.setDelay('stop', 1);
  fake.substrate.setDelay('start', 1);
  const a = await rig.tenant('pro');
  const op = (name: string, id: string) =>
    name === 'delete' ? rig.call('DELETE', `/v1/machines/${id}`, { key: a.key }) : rig.call('POST', `/v1/machines/${id}/${name}`, { key: a.key });
  const pairs: Record<'running' | 'stopped', Array<[string, string]>> = {
    running: [['stop', 'stop'], ['stop', 'restart'], ['restart', 'restart'], ['stop', 'delete'], ['restart', 'delete'], ['delete', 'delete']],
    stopped: [['start', 'start'], ['start', 'delete'], ['delete', 'start'], ['delete', 'delete']],
  };
  let m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  let state: 'running' | 'stopped' | 'gone' = 'running';
  let bad = 0;
  for (let round = 0; round < 1000; round++) {
    if (state === 'gone') {
      m = (await rig.call('POST', '/v1/machines', { key: a.key, body: { start: round % 2 === 0 } })).json;
      state = m.state === 'running' ? 'running' : 'stopped';
    }
    const choices: Array<[string, string]> = pairs[state];
    const [x, y] = choices[round % choices.length]!;
    const [rx, ry] = await Promise.all([op(x, m.id), op(y, m.id)]);
    const ok = [rx, ry].filter((r) => r.status === 200 || r.status === 204);
    const lost = [rx, ry].filter((r) => r.status === 409 && r.json?.error?.code === 'conflict');
    if (ok.length !== 1 || lost.length !== 1) {
      bad++;
      if (bad < 5) t.fail(`round ${round} ${x}+${y} from ${state}: ${rx.status} ${ry.status}`);
      continue;
    }
    const winner = ok[0] === rx ? x : y;
    state = winner === 'delete' ? 'gone' : winner === 'stop' ? 'stopped' : 'running';
    if (state !== 'gone') {
      const now = (await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key })).json.state;
      if (now !== state) {
        bad++;
        t.fail(`round ${round}: expected ${state}, stored ${now}`);
      }
    }
  }
  t.equal(bad, 0, 'every round had exactly one winner and the stored state matches it');
});

t.test('compare-and-set in the store: a stale read never moves the row', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const at = new Date().toISOString();
  t.ok((await rig.store.machines.casState(m.id, 'running', 'stopping', at)), 'first CAS moves');
  t.notOk((await rig.store.machines.casState(m.id, 'running', 'deleting', at)), 'second CAS from the same read fails');
  t.equal((await rig.store.machines.byId(m.id))!.state, 'stopping');
});

t.test('quotas: subscription, machines, running_machines, largest size', async (t) => {
  const { rig } = await setup(t);
  const none = await rig.tenant('none');
  const refused = await rig.call('POST', '/v1/machines', { cookie: none.cookie, body: {} });
  assertEnvelope(t, refused, 'quota_exceeded', 402);
  t.equal(refused.json.error.quota.limit, 'subscription');

  const dev = await rig.tenant('developer'); // running 3, machines 5, largest standard
  const big = await rig.call('POST', '/v1/machines', { key: dev.key, body: { size: 'large' } });
  assertEnvelope(t, big, 'invalid_request', 400);
  t.equal(big.json.error.details[0].field, 'size');
  t.equal((await rig.call('POST', '/v1/machines', { key: dev.key, body: { size: 'standard' } })).status, 201, 'largest size allowed');
  for (let i = 0; i < 2; i++) t.equal((await rig.call('POST', '/v1/machines', { key: dev.key, body: {} })).status, 201);
  const fourth = await rig.call('POST', '/v1/machines', { key: dev.key, body: {} });
  assertEnvelope(t, fourth, 'quota_exceeded', 402);
  t.match(fourth.json.error.quota, { limit: 'running_machines', current: 3, maximum: 3, plan_id: 'developer' });
  const cold1 = await rig.call('POST', '/v1/machines', { key: dev.key, body: { start: false } });
  t.equal(cold1.status, 201, 'a stopped machine does not count as running');
  t.equal((await rig.call('POST', '/v1/machines', { key: dev.key, body: { start: false } })).status, 201);
  const sixth = await rig.call('POST', '/v1/machines', { key: dev.key, body: { start: false } });
  assertEnvelope(t, sixth, 'quota_exceeded', 402);
  t.match(sixth.json.error.quota, { limit: 'machines', current: 5, maximum: 5 });
  const start = await rig.call('POST', `/v1/machines/${cold1.json.id}/start`, { key: dev.key });
  assertEnvelope(t, start, 'quota_exceeded', 402);
  t.equal(start.json.error.quota.limit, 'running_machines');
  t.equal((await rig.call('GET', `/v1/machines/${cold1.json.id}`, { key: dev.key })).json.state, 'stopped', 'refused start leaves it stopped');

  const billing = await rig.call('GET', '/v1/billing', { cookie: dev.cookie });
  const lim = Object.fromEntries(billing.json.limits.map((l: any) => [l.key, l.current]));
  t.equal(lim.machines, 5, 'machines counter registered');
  t.equal(lim.running_machines, 3, 'running_machines counter registered');

  // A canceled account gets its running machines stopped.
  const portal = await rig.call('POST', '/v1/billing/portal', { cookie: dev.cookie, body: {} });
  const tokenPath = new URL(portal.json.url).pathname;
  t.equal((await rig.call('POST', `${tokenPath}/cancel`, {})).status, 303);
  // The billing stops run after the cancel is answered: wait until they are done (the captures they end with).
  const after = await until('the billing stops', 120, async () => {
    const r = await rig.call('GET', '/v1/machines?state=running', { key: dev.key });
    return r.json.data.length === 0 ? r : null;
  });
  t.equal(after.json.data.length, 0, 'no machine left running after cancel');
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${cold1.json.id}/start`, { key: dev.key }), 'quota_exceeded', 402);
});

t.test('organization scoping and permissions', async (t) => {
  const { rig } = await setup(t);
  const a = await rig.tenant('pro');
  const b = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const probes: Array<[string, string, unknown?]> = [
    ['GET', `/v1/machines/${m.id}`], ['PATCH', `/v1/machines/${m.id}`, { name: 'x' }], ['POST', `/v1/machines/${m.id}/stop`],
    ['DELETE', `/v1/machines/${m.id}`], ['GET', `/v1/machines/${m.id}/events`], ['GET', `/v1/machines/${m.id}/display`],
    ['POST', `/v1/machines/${m.id}/exec`, { command: ['true'] }], ['GET', `/v1/machines/${m.id}/input-lease`],
    ['POST', '/v1/sessions', { machine_id: m.id, type: 'agent' }], ['GET', `/v1/machines/${m.id}/files?path=/`],
  ];
  for (const [method, path, body] of probes) {
    assertEnvelope(t, await rig.call(method, path, { key: b.key, body }), 'not_found', 404);
  }
  t.equal((await rig.call('GET', '/v1/machines', { key: b.key })).json.data.length, 0);
  assertEnvelope(t, await rig.call('GET', '/v1/machines/mch_nope', { key: a.key }), 'not_found', 404);

  const reader = await rig.key(a.cookie, ['machines:read']);
  t.equal((await rig.call('GET', `/v1/machines/${m.id}`, { key: reader.key })).status, 200, 'reads need membership only');
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: reader.key }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/machines', { key: reader.key, body: {} }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', `/v1/machines/${m.id}/exec`, { key: reader.key, body: { command: ['true'] } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/sessions', { key: reader.key, body: { machine_id: m.id, type: 'view' } }), 'permission_denied', 403);
  const sessOnly = await rig.key(a.cookie, ['sessions:write']);
  t.equal((await rig.call('POST', '/v1/sessions', { key: sessOnly.key, body: { machine_id: m.id, type: 'view' } })).status, 201, 'sessions:write alone opens a session');
  const controlOnly = await rig.key(a.cookie, ['machines:control']);
  assertEnvelope(t, await rig.call('DELETE', `/v1/machines/${m.id}`, { key: controlOnly.key }), 'permission_denied', 403);
  await assertNoLeaks(t, rig);
});

t.test('reconciler settles transient states after a control-plane restart', async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig1 = await makeMachinesRig({ substrate: fake.substrate });
  const a = await rig1.tenant('pro');
  const mk = async (body: object) => (await rig1.call('POST', '/v1/machines', { key: a.key, body })).json.id as string;
  const creating = await mk({});
  const starting = await mk({ start: false });
  const stopping = await mk({});
  const deleting = await mk({});
  const lost = await mk({});
  const lostCreating = await mk({});
  const rebooted = await mk({});
  await fake.substrate.start(starting);
  const setState = async (id: string, s: MachineState) => rig1.store.db.q().updateTable('machines').set({ state: s }).where('id', '=', id).execute();
  await setState(creating, 'creating');
  await setState(starting, 'starting');
  await setState(stopping, 'stopping');
  await setState(deleting, 'deleting');
  await setState(lostCreating, 'creating');
  fake.substrate.lose(lost);
  fake.substrate.machines.delete(lostCreating);
  // A host reboot: the machine's runtime is gone but its disk and record are there (status stopped).
  await fake.substrate.stop(rebooted);
  await rig1.close({ keepDir: true });

  const rig2 = await makeMachinesRig({ substrate: fake.substrate, dir: rig1.dir });
  t.teardown(async () => {
    fake.close();
    await rig2.close();
  });
  t.same(await rig2.services.machines.reconcile({ before: '2000-01-01T00:00:00.000Z' }), [], 'machines moved after the cut (by live callers) are left alone');
  t.equal((await rig2.store.machines.byId(creating))!.state, 'creating');
  const moved = await rig2.services.machines.reconcile();
  const state = async (id: string) => (await rig2.store.machines.byId(id))?.state ?? 'deleted';
  t.equal(await state(creating), 'running');
  t.equal(await state(starting), 'running');
  t.equal(await state(stopping), 'stopped');
  t.equal(fake.substrate.machines.get(stopping)?.state, 'stopped', 'the reconciler finished the stop');
  t.equal(await state(deleting), 'deleted');
  t.notOk(fake.substrate.machines.has(deleting));
  t.equal(await state(rebooted), 'running', 'a machine left running is started again after a host reboot');
  t.equal(fake.substrate.machines.get(rebooted)?.state, 'running');
  t.equal(await state(lost), 'stopped', 'one whose start fails rests stopped');
  t.equal(await state(lostCreating), 'error');
  t.equal(moved.length, 7);
  const failed = await rig2.store.db.q().selectFrom('machine_events').select('machine_id').where('type', '=', 'machine.failed').orderBy('seq').execute();
  t.same(new Set(failed.map((f) => f.machine_id)), new Set([lostCreating]));
  // The last lifecycle event: a `machine.ready` the readiness watch records after the boot may come later, when it
  // will (it did first on PostgreSQL, whose queries take longer than the watch's first probe).
  const last = async (id: string) => JSON.parse((await rig2.store.db.q().selectFrom('machine_events').select('data').where('machine_id', '=', id)
    .where('type', '!=', 'machine.ready').orderBy('seq', 'desc').limit(1).executeTakeFirstOrThrow()).data);
  t.match(await last(rebooted), { from: 'starting', to: 'running', reason: 'host_restart' });
  t.match(await last(lost), { from: 'starting', to: 'stopped', reason: 'host_restart', restarted: false, code: 'compute_unavailable' });
});

t.test('events: subscribe delivers in order, without gaps, from a cursor', async (t) => {
  const { rig } = await setup(t);
  // Deliveries are asynchronous (on PostgreSQL they follow a read of the table): wait, bounded, until `n` arrived.
  const delivered = async (got: string[], n: number) => {
    for (let i = 0; i < 500 && got.length < n; i++) await new Promise((r) => setTimeout(r, 10));
  };
  const a = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const head = rig.services.events.headCursor(m.id);
  const seen: string[] = [];
  const cursors: string[] = [];
  const unsub = rig.services.events.subscribe(m.id, null, (d) => {
    if (d.event.type === 'machine.ready') return;
    seen.push(d.event.type);
    cursors.push(d.cursor);
  });
  await rig.call('POST', `/v1/machines/${m.id}/stop`, { key: a.key });
  await rig.call('POST', `/v1/machines/${m.id}/start`, { key: a.key });
  await rig.call('PATCH', `/v1/machines/${m.id}`, { key: a.key, body: { metadata: { k: 'v' } } });
  await delivered(seen, 3);
  t.same(seen, ['machine.stopped', 'machine.started', 'machine.updated']);
  unsub();
  // Resume from the first delivered cursor: the rest, in order.
  const resumed: string[] = [];
  const unsub2 = rig.services.events.subscribe(m.id, cursors[0]!, (d) => d.event.type !== 'machine.ready' && resumed.push(d.event.type));
  await delivered(resumed, 2);
  t.same(resumed, ['machine.started', 'machine.updated']);
  unsub2();
  const fromHead: string[] = [];
  const unsub3 = rig.services.events.subscribe(m.id, (await head), (d) => d.event.type !== 'machine.ready' && fromHead.push(d.event.type));
  await delivered(fromHead, 3);
  t.same(fromHead, seen, 'head cursor taken before the calls replays them all');
  unsub3();
});

t.test('substrate failures during create', async (t) => {
  const { rig, fake } = await setup(t);
  const a = await rig.tenant('pro');
  fake.substrate.failNext('start');
  const r = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'boom' } });
  assertEnvelope(t, r, 'compute_unavailable', 503);
  const list = (await rig.call('GET', '/v1/machines', { key: a.key })).json.data;
  t.equal(list.length, 1);
  t.equal(list[0].state, 'error', 'a failed create lands in error');
  const ev = (await rig.call('GET', `/v1/machines/${list[0].id}/events`, { key: a.key })).json.data.map((e: any) => e.type);
  t.same(ev, ['machine.failed', 'machine.created']);
  t.equal((await rig.call('POST', `/v1/machines/${list[0].id}/start`, { key: a.key })).json.state, 'running', 'and can be started from error');

  fake.substrate.failNext('create');
  const cold = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'cold', start: false } });
  assertEnvelope(t, cold, 'compute_unavailable', 503);
  t.equal((await rig.call('GET', '/v1/machines', { key: a.key })).json.data.length, 1, 'a failed start:false create leaves nothing');
  t.equal((await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'cold', start: false } })).status, 201, 'the name is free again');
  assertEnvelope(t, await rig.call('PATCH', `/v1/machines/${list[0].id}`, { key: a.key, body: {} }), 'invalid_request', 400);
  assertEnvelope(t, await rig.call('POST', '/v1/machines', { key: a.key, body: { template: 'tpl_nope' } }), 'not_found', 404);
  t.ok(rig.failures.length >= 2, 'causes went to the operator log hook');
});

/**
 * The control plane killed (SIGKILL, a child process at a named fault point) inside create and delete, on real
 * podman containers (issue 14 item 4). After a restart and the reconciler every machine is in an honest state:
 * - create with start:false killed after the row was written and before the substrate acted: `error`
 *   (machine.failed {operation: create, reason: create_interrupted}); start answers 409 with no Retry-After
 *   (a permanent failure is not retryable); delete works and leaves nothing behind;
 * - create killed after the disk and record were made, before `podman create`: `error`; start resumes it (the
 *   container is created on the disk that exists) and the machine runs;
 * - delete killed after the decision, before the destroy: the reconciler finishes it; no container, machine
 *   directory or blob is left.
 *
 * On PostgreSQL (test/postgres/create-delete-crash.test.ts runs this file with COMPUTER_TEST_ENGINE=postgres; the
 * crash child opens the same database, helpers/rig-db.ts) the two points where the store decides and records before
 * the substrate acts run: create's and delete's. The kill inside the substrate's own create (before `podman
 * create`) stays SQLite-only: what the store holds there (a `creating` row) is written by the same code as at
 * create's point, and what is tested after it is the container substrate's resume, which no engine changes.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { blobsIn, eventsOf, podmanState, restartableContainerRig } from '../helpers/faults.js';
import { TEST_ENGINE } from '../helpers/rig-db.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

t.test('crashes inside create and delete', { timeout: 900_000 }, async (t) => {
  const cp = await restartableContainerRig(t);
  const { key } = await cp.rig.tenant();
  const byName = async (name: string) => {
    const r = await cp.rig.call('GET', '/v1/machines?limit=100', { key });
    return (r.json.data as Array<{ id: string; name: string; state: string }>).find((m) => m.name === name);
  };
  const baseline = blobsIn(cp.root);

  await t.test('create start:false killed before the substrate acted', async (t) => {
    const { signal } = await cp.crashAt('machines.create.before_substrate', key, 'POST', '/v1/machines', { name: 'never', start: false });
    t.equal(signal, 'SIGKILL', 'the control plane died at the point');
    const m = (await byName('never'))!;
    t.equal(m.state, 'stopped', 'the row said stopped before the disk existed');
    const moved = await cp.rig.services.machines.reconcile();
    t.same(moved, [{ id: m.id, from: 'stopped', to: 'error' }]);
    t.match((await eventsOf(cp.rig, key, m.id)).at(-1), {
      type: 'machine.failed', data: { from: 'stopped', to: 'error', operation: 'create', reason: 'create_interrupted' },
    });
    const s = await cp.rig.call('POST', `/v1/machines/${m.id}/start`, { key });
    t.equal(s.status, 409, s.text);
    t.equal(s.json.error.code, 'conflict');
    t.match(s.json.error.message, /create did not complete/);
    t.equal(s.headers.get('retry-after'), null, 'not retryable');
    t.equal((await cp.rig.call('DELETE', `/v1/machines/${m.id}`, { key })).status, 204);
    t.notOk(fs.existsSync(path.join(cp.root, 'machines', m.id)), 'no machine directory');
    t.same(blobsIn(cp.root), baseline, 'no blob left');
  });

  let resumed = '';
  if (TEST_ENGINE === 'sqlite') await t.test('create killed before podman create: start resumes it', async (t) => {
    const { signal } = await cp.crashAt('container.create.before_podman', key, 'POST', '/v1/machines', { name: 'half' });
    t.equal(signal, 'SIGKILL');
    const m = (await byName('half'))!;
    resumed = m.id;
    t.equal(m.state, 'creating');
    t.equal(await podmanState(cp.substrate, m.id), null, 'podman never heard of it');
    t.same(await cp.rig.services.machines.reconcile(), [{ id: m.id, from: 'creating', to: 'error' }]);
    const s = await cp.rig.call('POST', `/v1/machines/${m.id}/start`, { key });
    t.equal(s.status, 200, s.text);
    t.equal(s.json.state, 'running');
    t.equal(await podmanState(cp.substrate, m.id), 'running');
  });

  await t.test('delete killed before the destroy: the reconciler finishes it', async (t) => {
    if (!resumed) {
      // On PostgreSQL, a machine made without a crash (stopped: its container exists, nothing runs).
      const made = await cp.rig.call('POST', '/v1/machines', { key, body: { name: 'half', start: false } });
      t.equal(made.status, 201, made.text);
      resumed = made.json.id as string;
    }
    const { signal } = await cp.crashAt('machines.delete.before_destroy', key, 'DELETE', `/v1/machines/${resumed}`);
    t.equal(signal, 'SIGKILL');
    t.equal((await byName('half'))?.state, 'deleting');
    t.same(await cp.rig.services.machines.reconcile(), [{ id: resumed, from: 'deleting', to: 'deleted' }]);
    t.equal((await cp.rig.call('GET', `/v1/machines/${resumed}`, { key })).status, 404);
    t.equal(await podmanState(cp.substrate, resumed), null, 'no container');
    t.notOk(fs.existsSync(path.join(cp.root, 'machines', resumed)), 'no machine directory');
    t.same(blobsIn(cp.root), baseline, 'no blob left');
  });
});

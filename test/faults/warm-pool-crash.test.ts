/**
 * The control plane killed (SIGKILL, a child process at a named fault point) inside the warm pool's steps, on real
 * podman containers (issue 26 item 1). After a restart and the reconciler nothing of the pool is left on the host
 * and no tenant's machine is lost:
 * - killed while making a member, after the ledger named it and before the substrate acted: nothing on the host;
 * - killed with a member ready: the container the dead run left is destroyed;
 * - killed after a create's take was recorded (its row) and before the ledger let go of the member: the machine is
 *   the tenant's, settled `running`, and its agent answers with the tenant's key.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileLedger } from '../../control-plane/src/services/machines/pool-ledger.js';
import { agentAnswers, blobsIn, podmanOf, podmanState, restartableContainerRig } from '../helpers/faults.js';

t.setTimeout(1_200_000);

t.test('crashes inside the warm pool', { timeout: 900_000 }, async (t) => {
  const cp = await restartableContainerRig(t);
  const { key } = await cp.rig.tenant();
  const ledger = () => fileLedger(path.join(cp.dir, 'warm-pool.json'));
  const containers = async () => (await podmanOf(cp.substrate, 'ps', '-a', '--format', '{{.Names}}')).split('\n').filter(Boolean);
  const baseline = blobsIn(cp.root);
  const warm = { warm: true };

  await t.test('killed while making a member', async (t) => {
    let named: string[] = [];
    const { signal } = await cp.crashAt('pool.fill.before_substrate', key, 'GET', '/v1/machines', undefined, () => void (named = ledger().all().map((e) => e.id)), warm);
    t.equal(signal, 'SIGKILL');
    t.equal(named.length, 1, 'the ledger named the member before it was made');
    await cp.rig.services.machines.reconcile();
    t.same(ledger().all(), [], 'the ledger is empty');
    t.same(await containers(), [], 'no container');
    t.notOk(fs.existsSync(path.join(cp.root, 'machines', named[0]!)), 'no machine directory');
    t.same(blobsIn(cp.root), baseline, 'no blob left');
  });

  await t.test('killed with a member ready', async (t) => {
    let named: string[] = [];
    const { signal } = await cp.crashAt('pool.fill.ready', key, 'GET', '/v1/machines', undefined, () => void (named = ledger().all().map((e) => e.id)), warm);
    t.equal(signal, 'SIGKILL');
    t.equal(named.length, 1);
    t.equal(await podmanState(cp.substrate, named[0]!), 'running', 'the dead run left its member running');
    t.same(await cp.rig.services.machines.reconcile(), [], 'no row moved');
    t.equal(await podmanState(cp.substrate, named[0]!), null, 'the member was destroyed');
    t.same(ledger().all(), []);
    t.same(blobsIn(cp.root), baseline, 'no blob left');
    t.same((await cp.rig.call('GET', '/v1/machines', { key })).json.data, [], 'nobody has a machine');
  });

  await t.test('killed after the take was recorded', async (t) => {
    const { signal } = await cp.crashAt('machines.create.warm_taken', key, 'POST', '/v1/machines', { name: 'warm' }, undefined, warm);
    t.equal(signal, 'SIGKILL');
    const m = ((await cp.rig.call('GET', '/v1/machines', { key })).json.data as Array<{ id: string; name: string; state: string }>)[0]!;
    t.equal(m.name, 'warm');
    t.equal(m.state, 'creating', 'the take recorded the row');
    t.same(ledger().all().map((e) => e.id), [m.id], 'the ledger still named the member');
    t.same(await cp.rig.services.machines.reconcile(), [{ id: m.id, from: 'creating', to: 'running' }], "the row's table settles it");
    t.same(ledger().all(), [], 'the ledger forgot it');
    t.equal(await podmanState(cp.substrate, m.id), 'running', 'the machine kept running');
    await agentAnswers(cp.rig, key, m.id);
    t.pass("its agent answers with the tenant's key");
    t.equal((await cp.rig.call('DELETE', `/v1/machines/${m.id}`, { key })).status, 204);
    t.same(await containers(), [], 'nothing else left');
  });
});

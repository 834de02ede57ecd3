/**
 * isUniqueViolation recognises a unique or primary key refusal on both engines (and nothing else), so a caller's
 * check-then-insert that lost a race on PostgreSQL can answer with its conflict.
 */
import t from 'tap';
import { isUniqueViolation } from '../../../control-plane/src/store/unique-violation.js';
import { ENGINES, machineRow, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('the write was not refused');
}

for (const engine of ENGINES) {
  t.test(engine, async (t) => {
    const store = await rig.open(t, engine);
    await seedOrg(store);
    const user = { id: 'usr_b', email: 'usr_a@example.com', name: null, password_hash: 'h', personal_org_id: null, created_at: T0 };
    t.ok(isUniqueViolation(await failure(store.identity.insertUser(user))), 'a taken e-mail (unique column)');
    t.ok(isUniqueViolation(await failure(store.identity.insertOrg({ id: 'org_a', name: 'again', personal: 0, created_at: T0 }))), 'a taken primary key');
    await store.machines.insert(machineRow('mch_1', { name: 'web' }));
    t.ok(isUniqueViolation(await failure(store.machines.insert(machineRow('mch_2', { name: 'web' })))), 'a taken live machine name (partial unique index)');
    t.notOk(isUniqueViolation(await failure(store.machines.insert(machineRow('mch_3', { org_id: 'org_x' })))), 'a foreign key refusal is not one');
    t.notOk(isUniqueViolation(new Error('23505')));
    t.notOk(isUniqueViolation({ code: '23505' }), 'not an Error');
  });
}

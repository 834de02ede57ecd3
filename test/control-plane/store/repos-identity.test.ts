/**
 * The identity, access, billing, rate-limit and Stripe repositories on both engines (issue 24 item 1): every method,
 * literal rows back, compare-and-sets with exactly one winner among racing transactions, pages in order.
 */
import t from 'tap';
import { ENGINES, race, seedOrg, storeEngines, T0 } from '../../helpers/store-engines.js';

const rig = storeEngines(t);
const FAR = '2030-01-01T00:00:00.000Z';

for (const engine of ENGINES) {
  t.test(`identity on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const id = store.identity;
    await seedOrg(store);
    t.strictSame(await id.userByEmail('usr_a@example.com'), { id: 'usr_a', email: 'usr_a@example.com', name: null, password_hash: 'hash', personal_org_id: null, created_at: T0 });
    t.strictSame(await id.setPersonalOrg('usr_a', 'org_a'), { changes: 1 });
    t.strictSame(await id.userById('usr_a'), { id: 'usr_a', email: 'usr_a@example.com', name: null, password_hash: 'hash', personal_org_id: 'org_a', created_at: T0 });
    t.equal(await id.userById('usr_x'), undefined);
    t.strictSame(await id.orgById('org_a'), { id: 'org_a', name: 'name of org_a', personal: 0, created_at: T0 });
    await store.db.tx(() => id.lockOrg('org_a'));

    await id.insertUser({ id: 'usr_b', email: 'b@example.com', name: 'Bea', password_hash: 'h', personal_org_id: null, created_at: T0 });
    await id.insertUser({ id: 'usr_c', email: 'c@example.com', name: null, password_hash: 'h', personal_org_id: null, created_at: T0 });
    await id.insertMembership({ id: 'mem_2', org_id: 'org_a', user_id: 'usr_b', role: 'member', created_at: '2026-01-01T00:00:01.000Z' });
    await id.insertMembership({ id: 'mem_3', org_id: 'org_a', user_id: 'usr_c', role: 'admin', created_at: '2026-01-01T00:00:01.000Z' });
    await id.insertMembership({ id: 'mem_1', org_id: 'org_a', user_id: 'usr_a', role: 'owner', created_at: T0 });
    t.strictSame(await id.membership('org_a', 'usr_b'), { id: 'mem_2', org_id: 'org_a', user_id: 'usr_b', role: 'member', created_at: '2026-01-01T00:00:01.000Z' });
    t.strictSame(await id.membershipInOrg('org_a', 'mem_2'), {
      id: 'mem_2', org_id: 'org_a', user_id: 'usr_b', role: 'member', created_at: '2026-01-01T00:00:01.000Z', email: 'b@example.com', name: 'Bea',
    });
    t.strictSame(await id.membershipsOfUser('usr_a'), [{ id: 'mem_1', org_id: 'org_a', user_id: 'usr_a', role: 'owner', created_at: T0, org_name: 'name of org_a' }]);
    const first = await id.membersPage('org_a', { created_at: '', id: '' }, 2);
    t.strictSame(first.map((m) => [m.id, m.email]), [['mem_1', 'usr_a@example.com'], ['mem_2', 'b@example.com']], 'by created_at, then id');
    t.strictSame((await id.membersPage('org_a', { created_at: '2026-01-01T00:00:01.000Z', id: 'mem_2' }, 2)).map((m) => m.id), ['mem_3'], 'after the cursor');
    t.equal(await id.countMembers('org_a'), 3);
    t.equal(await id.countOwners('org_a'), 1);
    t.strictSame(await id.setRole('mem_3', 'owner'), { changes: 1 });
    t.equal(await id.countOwners('org_a'), 2);
    t.strictSame(await id.deleteMembership('mem_3'), { changes: 1 });
    t.strictSame(await id.deleteMembership('mem_3'), { changes: 0 });
    t.equal(await id.countMembers('org_a'), 2);

    const session = (n: number, over: { expires_at?: string; created_at?: string } = {}) => ({
      id: `aus_${n}`, user_id: 'usr_a', token_hash: `th${n}`, active_org_id: null, created_at: over.created_at ?? T0, last_used_at: T0,
      expires_at: over.expires_at ?? FAR, revoked_at: null,
    });
    await id.insertSession(session(1));
    await id.insertSession(session(2, { expires_at: '2026-01-01T00:00:05.000Z' }));
    const third = session(3, { created_at: '2026-01-01T00:00:02.000Z' });
    await id.insertSession(third);
    await id.insertSession(session(4));
    t.strictSame(await id.sessionByTokenHash('th1'), session(1));
    t.strictSame(await id.sessionOfUser('usr_a', 'aus_3'), third);
    t.equal(await id.sessionOfUser('usr_b', 'aus_3'), undefined);
    t.strictSame(await id.revokeSession('aus_4', '2026-01-02T00:00:00.000Z'), { changes: 1 });
    t.strictSame(await id.revokeSession('aus_4', '2026-01-03T00:00:00.000Z'), { changes: 0 }, 'a revoked session is revoked once');
    t.strictSame((await id.liveSessionsPage('usr_a', '2026-01-01T00:00:10.000Z', { created_at: '', id: '' }, 10)).map((s) => s.id), ['aus_1', 'aus_3'], 'neither expired nor revoked');
    t.strictSame((await id.liveSessionsPage('usr_a', '2026-01-01T00:00:01.000Z', { created_at: T0, id: 'aus_1' }, 10)).map((s) => s.id), ['aus_2', 'aus_3']);
    t.strictSame(await id.touchSession('aus_1', '2026-01-05T00:00:00.000Z'), { changes: 1 });
    t.strictSame(await id.setActiveOrg('aus_1', 'org_a'), { changes: 1 });
    t.strictSame(await id.sessionByTokenHash('th1'), { ...session(1), last_used_at: '2026-01-05T00:00:00.000Z', active_org_id: 'org_a' });
  });

  t.test(`access on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const a = store.access;
    await seedOrg(store);
    const inv = (n: number, expires: string) => ({
      id: `inv_${n}`, org_id: 'org_a', email: `x${n}@example.com`, role: 'member' as const, state: 'pending' as const, token_hash: `it${n}`,
      invited_by: 'usr_a', created_at: `2026-01-01T00:00:0${n}.000Z`, expires_at: expires, accepted_at: null, accepted_by: null, revoked_at: null,
    });
    for (const n of [1, 2, 3]) await a.insertInvitation(inv(n, n === 2 ? '2026-01-02T00:00:00.000Z' : FAR));
    t.equal(await a.countPendingInvitations('org_a'), 3);
    t.strictSame(await a.expireInvitations('2026-01-02T00:00:00.000Z'), { changes: 1 }, 'expired at its expiry instant');
    t.strictSame(await a.invitationInOrg('org_a', 'inv_2'), { ...inv(2, '2026-01-02T00:00:00.000Z'), state: 'expired' });
    t.equal(await a.countPendingInvitations('org_a'), 2);
    t.strictSame(await a.invitationByTokenHash('it3'), inv(3, FAR));
    t.strictSame(await a.pendingInvitationFor('org_a', 'x1@example.com'), inv(1, FAR));
    t.equal(await a.pendingInvitationFor('org_a', 'x2@example.com'), undefined);
    t.strictSame((await a.invitationsPage('org_a', { created_at: '', id: '' }, 2)).map((i) => i.id), ['inv_1', 'inv_2']);
    t.strictSame((await a.invitationsPage('org_a', { created_at: '2026-01-01T00:00:02.000Z', id: 'inv_2' }, 2)).map((i) => i.id), ['inv_3']);
    const wins = await race(store, 4, async (i) =>
      (await a.moveInvitation('inv_1', 'pending', i % 2 ? 'accepted' : 'revoked', { at: '2026-01-03T00:00:00.000Z', by: 'usr_a' })).changes === 1,
    );
    t.strictSame(wins, [false, false, false, true], 'one of four racing accepts/revokes wins');
    t.equal((await a.invitationInOrg('org_a', 'inv_1'))!.state === 'pending', false);
    t.strictSame(await a.moveInvitation('inv_3', 'pending', 'accepted', { at: '2026-01-04T00:00:00.000Z', by: 'usr_a' }), { changes: 1 });
    t.strictSame(await a.invitationInOrg('org_a', 'inv_3'), { ...inv(3, FAR), state: 'accepted', accepted_at: '2026-01-04T00:00:00.000Z', accepted_by: 'usr_a' });

    const key = (n: number) => ({
      id: `key_${n}`, org_id: 'org_a', created_by: 'usr_a', name: `k${n}`, prefix: `p${n}`, secret_hash: `sh${n}`, scopes: '["machines:read"]',
      created_at: T0, last_used_at: null, revoked_at: null,
    });
    for (const n of [2, 1, 3]) await a.insertApiKey(key(n));
    t.strictSame(await a.apiKeyByHash('sh1'), key(1));
    t.strictSame(await a.apiKeyInOrg('org_a', 'key_2'), key(2));
    t.strictSame(await a.touchApiKey('key_2', '2026-01-05T00:00:00.000Z'), { changes: 1 });
    t.strictSame(await a.revokeApiKey('key_2', '2026-01-06T00:00:00.000Z'), { changes: 1 });
    t.strictSame(await a.revokeApiKey('key_2', '2026-01-07T00:00:00.000Z'), { changes: 0 });
    t.equal(await a.apiKeyByHash('sh2'), undefined, 'a revoked key no longer authenticates');
    t.equal(await a.apiKeyInOrg('org_a', 'key_2'), undefined);
    t.equal(await a.apiKeyCreator('org_a', 'key_2'), 'usr_a', 'its creator is still known');
    t.equal(await a.apiKeyCreator('org_a', 'key_9'), null);
    t.strictSame((await a.apiKeysPage('org_a', { created_at: '', id: '' }, 5)).map((k) => k.id), ['key_1', 'key_3']);
    t.strictSame((await a.apiKeysPage('org_a', { created_at: T0, id: 'key_1' }, 5)).map((k) => k.id), ['key_3']);
  });

  t.test(`billing and rate limits on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const b = store.billing;
    await seedOrg(store);
    await seedOrg(store, 'org_b', 'usr_b');
    const account = {
      org_id: 'org_a', state: 'trialing' as const, plan_id: 'pro', catalog_version: 'v1', provider: 'builtin', trial_ends_at: '2026-01-15T00:00:00.000Z',
      period_start: T0, period_end: '2026-01-15T00:00:00.000Z', updated_at: T0,
    };
    await b.insertAccount(account);
    await b.insertAccount({ ...account, org_id: 'org_b', trial_ends_at: '2026-01-10T00:00:00.000Z' });
    t.strictSame(await b.account('org_a'), account);
    t.strictSame((await b.dueTrials('2026-01-15T00:00:00.000Z')).map((x) => x.org_id), ['org_b', 'org_a'], 'by trial end');
    t.strictSame((await b.dueTrials('2026-01-12T00:00:00.000Z')).map((x) => x.org_id), ['org_b']);
    const active = { ...account, state: 'active' as const, trial_ends_at: null, updated_at: '2026-01-02T00:00:00.000Z' };
    t.strictSame(await race(store, 4, async () => (await b.updateAccount(active, 'trialing')).changes === 1), [false, false, false, true]);
    t.strictSame(await b.account('org_a'), active);

    t.strictSame(await b.insertEvent({ id: 'evt_2', org_id: 'org_a', type: 'payment.succeeded', from_state: 'trialing', to_state: 'active', created_at: '2026-01-02T00:00:00.000Z' }), { changes: 1 });
    await b.insertEvent({ id: 'evt_1', org_id: 'org_a', type: 'checkout.completed', from_state: 'unsubscribed', to_state: 'trialing', created_at: T0 });
    await b.insertEvent({ id: 'evt_3', org_id: 'org_b', type: 'checkout.completed', from_state: 'unsubscribed', to_state: 'trialing', created_at: T0 });
    // Two more of one instant, the later recorded with the smaller id: read back as recorded on both engines.
    await b.insertEvent({ id: 'evt_9', org_id: 'org_a', type: 'payment.failed', from_state: 'active', to_state: 'past_due', created_at: '2026-01-03T00:00:00.000Z' });
    await b.insertEvent({ id: 'evt_0', org_id: 'org_a', type: 'payment.succeeded', from_state: 'past_due', to_state: 'active', created_at: '2026-01-03T00:00:00.000Z' });
    t.strictSame(await b.events('org_a'), [
      { type: 'checkout.completed', from_state: 'unsubscribed', to_state: 'trialing', created_at: T0 },
      { type: 'payment.succeeded', from_state: 'trialing', to_state: 'active', created_at: '2026-01-02T00:00:00.000Z' },
      { type: 'payment.failed', from_state: 'active', to_state: 'past_due', created_at: '2026-01-03T00:00:00.000Z' },
      { type: 'payment.succeeded', from_state: 'past_due', to_state: 'active', created_at: '2026-01-03T00:00:00.000Z' },
    ]);

    const link = { token_hash: 'lt', kind: 'checkout' as const, org_id: 'org_a', plan_id: 'pro', return_url: null, created_at: T0, expires_at: FAR, used_at: null };
    await b.insertLink(link);
    t.strictSame(await b.link('lt', 'checkout'), link);
    t.equal(await b.link('lt', 'portal'), undefined);
    t.strictSame(await race(store, 3, async () => (await b.useLink('lt', '2026-01-03T00:00:00.000Z')).changes === 1), [false, false, true], 'a link is used once');
    t.strictSame(await b.link('lt', 'checkout'), { ...link, used_at: '2026-01-03T00:00:00.000Z' });

    const override = (id: string, from: string, until: string | null, created: string) => ({
      id, org_id: 'org_a', entitlements: `{"from":"${from}"}`, effective_from: from, effective_until: until, created_at: created,
    });
    t.strictSame(await b.insertOverride(override('ovr_1', T0, null, T0)), { changes: 1 });
    await b.insertOverride(override('ovr_2', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', T0));
    await b.insertOverride(override('ovr_3', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', '2026-01-20T00:00:00.000Z'));
    t.equal(await b.overrideAt('org_a', '2025-12-31T00:00:00.000Z'), undefined, 'none before the first');
    t.strictSame(await b.overrideAt('org_a', '2026-01-10T00:00:00.000Z'), override('ovr_1', T0, null, T0));
    t.strictSame((await b.overrideAt('org_a', '2026-02-10T00:00:00.000Z'))!.id, 'ovr_3', 'the latest effective, then the newest created');
    t.strictSame((await b.overrideAt('org_a', '2026-03-01T00:00:00.000Z'))!.id, 'ovr_1', 'an override ends at its until (exclusive)');
    // The account with the override in force, one statement: the same override as overrideAt's, its entitlements.
    const stored = (await b.account('org_a'))!;
    t.strictSame(await b.accountWithOverride('org_a', '2025-12-31T00:00:00.000Z'), { account: stored, override: null }, 'none in force');
    t.strictSame(await b.accountWithOverride('org_a', '2026-01-10T00:00:00.000Z'), { account: stored, override: `{"from":"${T0}"}` });
    t.strictSame(await b.accountWithOverride('org_a', '2026-02-10T00:00:00.000Z'), { account: stored, override: '{"from":"2026-02-01T00:00:00.000Z"}' });
    t.strictSame(await b.accountWithOverride('org_a', '2026-03-01T00:00:00.000Z'), { account: stored, override: `{"from":"${T0}"}` }, 'until exclusive');
    t.equal(await b.accountWithOverride('org_none', '2026-01-10T00:00:00.000Z'), undefined, 'no account');

    const r = store.rateLimits;
    t.equal(await r.get('login:x'), undefined);
    t.strictSame(await r.put('login:x', { window_start_ms: 1000, count: 1 }), { changes: 1 });
    t.strictSame(await r.put('login:x', { window_start_ms: 1000, count: 2 }), { changes: 1 }, 'an upsert');
    t.strictSame(await r.get('login:x'), { window_start_ms: 1000, count: 2 });
    t.strictSame(await r.clear('login:x'), { changes: 1 });
    t.equal(await r.get('login:x'), undefined);
  });

  t.test(`stripe on ${engine}`, async (t) => {
    const store = await rig.open(t, engine);
    const s = store.stripe;
    const customer = (org: string, cus: string) => ({ org_id: org, customer_id: cus, subscription_id: null, last_event_created: null, created_at: T0 });
    t.strictSame(await s.linkCustomer(customer('org_b', 'cus_1')), { changes: 1 });
    await s.linkCustomer(customer('org_a', 'cus_2'));
    t.strictSame(await s.linkCustomer(customer('org_a', 'cus_3')), { changes: 0 }, 'an organization keeps its first customer');
    t.strictSame(await s.customer('org_a'), customer('org_a', 'cus_2'));
    t.strictSame(await s.customerById('cus_1'), customer('org_b', 'cus_1'));
    t.strictSame((await s.customers()).map((c) => c.org_id), ['org_a', 'org_b']);
    t.strictSame(await s.setSubscription('org_a', 'sub_1', 100), { changes: 1 });
    await s.setSubscription('org_a', 'sub_2', 50);
    t.strictSame(await s.customer('org_a'), { ...customer('org_a', 'cus_2'), subscription_id: 'sub_2', last_event_created: 100 }, 'never moved back');
    await s.setSubscription('org_a', null, 1_700_000_000);
    t.strictSame(await s.customer('org_a'), { ...customer('org_a', 'cus_2'), subscription_id: null, last_event_created: 1_700_000_000 });

    const event = { id: 'evt_1', type: 'invoice.paid', org_id: 'org_a', outcome: 'applied', received_at: T0 };
    t.strictSame(await race(store, 3, () => s.markEvent(event)), [false, false, true], 'an event id is recorded once');
    t.strictSame(await s.event('evt_1'), { id: 'evt_1', type: 'invoice.paid', org_id: 'org_a', outcome: 'applied' });
    t.equal(await s.event('evt_2'), undefined);

    t.strictSame(await s.ensureReport('org_a', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', 'compute'), { changes: 1 });
    t.strictSame(await s.ensureReport('org_a', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', 'compute'), { changes: 0 });
    await s.ensureReport('org_a', T0, '2026-02-01T00:00:00.000Z', 'storage');
    await s.ensureReport('org_a', T0, '2026-02-01T00:00:00.000Z', 'compute');
    const report = (start: string, end: string, meter: string, over = {}) => ({ org_id: 'org_a', period_start: start, period_end: end, meter, reported: 0, pending: null, closed: 0, ...over });
    t.strictSame(await s.reports('org_a'), [
      report(T0, '2026-02-01T00:00:00.000Z', 'compute'),
      report(T0, '2026-02-01T00:00:00.000Z', 'storage'),
      report('2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', 'compute'),
    ]);
    t.strictSame(await race(store, 3, async (i) => (await s.setPending('org_a', T0, 'compute', 0, 10 + i)).changes === 1), [false, false, true], 'one reporter');
    const pending = (await s.reports('org_a'))[0]!.pending!;
    t.strictSame(await s.acknowledge('org_a', T0, 'compute', pending + 1), { changes: 0 }, 'another quantity is not acknowledged');
    t.strictSame(await s.acknowledge('org_a', T0, 'compute', pending), { changes: 1 });
    t.strictSame(await s.closePeriod('org_a', T0, '2026-01-31T00:00:00.000Z'), { changes: 2 });
    t.strictSame((await s.reports('org_a')).slice(0, 2), [
      report(T0, '2026-01-31T00:00:00.000Z', 'compute', { reported: pending, closed: 1 }),
      report(T0, '2026-01-31T00:00:00.000Z', 'storage', { closed: 1 }),
    ]);
  });
}

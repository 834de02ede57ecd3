/**
 * The Stripe provider, offline: the official `stripe` package talks to a loopback fake of the Stripe API
 * (test/helpers/fake-stripe.ts), and webhook deliveries are signed with stripe.webhooks.generateTestHeaderString.
 * Checked: what checkout and the portal send to Stripe, signature failures refused with nothing changed,
 * replays ignored, out-of-order events, the account states following the subscription, and usage
 * reported as meter events exactly once (a failed call resent under the same identifier).
 */
import t from 'tap';
import Stripe from 'stripe';
import { parseConfig } from '../../control-plane/src/config.js';
import { eventsToReach, stateForSubscriptionStatus, stripeMeterQuantities } from '../../control-plane/src/domain/stripe-billing.js';
import { emptyTotals } from '../../control-plane/src/domain/usage-summary.js';
import { startFakeStripe } from '../helpers/fake-stripe.js';
import { assertEnvelope, makeRig, PUBLIC_ORIGIN } from '../helpers/control-plane.js';

const SECRET_KEY = 'sk_test_51FakeKeyForTheLoopbackFakeOnly0123456789';
const WEBHOOK_SECRET = 'whsec_testSigningSecret0123456789abcdef';
const ENV = {
  BILLING_PROVIDER: 'stripe', STRIPE_SECRET_KEY: SECRET_KEY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  STRIPE_PRICES: 'developer=price_dev_month,pro=price_pro_month', STRIPE_METERED_PRICES: 'price_compute_metered,price_egress_metered',
};
const GIB = 2 ** 30;

t.test('pure mapping: subscription statuses, paths through the state table, meter units', async (t) => {
  t.same(['trialing', 'active', 'past_due', 'unpaid', 'canceled', 'incomplete_expired', 'incomplete', 'paused'].map(stateForSubscriptionStatus),
    ['trialing', 'active', 'past_due', 'past_due', 'canceled', 'canceled', null, null]);
  t.same(eventsToReach('unsubscribed', 'trialing'), ['checkout.completed']);
  t.same(eventsToReach('unsubscribed', 'active'), ['checkout.completed', 'trial.converted']);
  t.same(eventsToReach('trialing', 'past_due'), ['trial.payment_failed']);
  t.same(eventsToReach('active', 'past_due'), ['payment.failed']);
  t.same(eventsToReach('past_due', 'active'), ['payment.succeeded']);
  t.same(eventsToReach('past_due', 'canceled'), ['subscription.canceled']);
  t.same(eventsToReach('canceled', 'active'), ['checkout.completed']);
  t.same(eventsToReach('active', 'active'), []);
  t.equal(eventsToReach('canceled', 'trialing'), null, 'a resubscription is never a trial');
  t.equal(eventsToReach('active', 'trialing'), null);
  const totals = { ...emptyTotals(), hot_storage_byte_seconds: 50n * 2n ** 30n * 7200n + 5n, cold_storage_byte_seconds: 2n ** 30n * 3599n, egress_bytes: 3n * 2n ** 30n + 1048575n };
  t.same(stripeMeterQuantities(14_400_000n, totals), { computer_compute: 14_400_000n, computer_hot_storage: 100n, computer_cold_storage: 0n, computer_egress: 3072n });
});

t.test('configuration: stripe needs its keys and prices; errors never echo a secret', async (t) => {
  const err = (() => {
    try {
      parseConfig({ BILLING_PROVIDER: 'stripe', STRIPE_SECRET_KEY: SECRET_KEY });
    } catch (e) {
      return e as { message: string; details: { field: string }[] };
    }
    return null;
  })();
  t.ok(err, 'refused');
  t.same(err!.details.map((d) => d.field).sort(), ['STRIPE_PRICES', 'STRIPE_WEBHOOK_SECRET']);
  t.notMatch(JSON.stringify(err), /FakeKey/, 'the key is not in the error');
  const bad = (() => {
    try {
      parseConfig({ ...ENV, STRIPE_WEBHOOK_SECRET: 'not-a-secret-value-xyz' });
    } catch (e) {
      return JSON.stringify(e) + String((e as Error).message);
    }
    return '';
  })();
  t.match(bad, /STRIPE_WEBHOOK_SECRET/);
  t.notMatch(bad, /not-a-secret-value-xyz/, 'a malformed secret is not echoed');
  t.equal(parseConfig({}).billingProvider, 'builtin', 'the built-in provider stays the default');
  t.same(parseConfig(ENV).stripe!.prices, { developer: 'price_dev_month', pro: 'price_pro_month' });
});

t.test('the webhook answers 501 when the built-in provider is in use', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  assertEnvelope(t, await rig.call('POST', '/v1/billing/stripe/webhook', { rawBody: '{}', headers: { 'stripe-signature': 't=1,v1=00' } }), 'unsupported_operation', 501);
});

t.test('stripe provider end to end against the loopback fake', async (t) => {
  const fake = await startFakeStripe();
  const rig = await makeRig({ env: ENV, services: { stripeClient: fake.client } });
  t.teardown(async () => {
    await rig.close();
    await fake.close();
  });
  t.equal(rig.services.builtin, null);
  const u = await rig.user('s');
  // Read with the browser session (the clock moves a day here, well within its 14): an unsubscribed
  // organization cannot create an API key.
  const acct = async () => (await rig.call('GET', '/v1/billing', { cookie: u.cookie })).json;
  const bodies: string[] = [];
  const call: typeof rig.call = async (...a) => {
    const r = await rig.call(...a);
    bodies.push(r.text);
    return r;
  };

  let seq = 0;
  const deliver = async (type: string, object: Record<string, unknown>, o: { created?: number; id?: string; secret?: string; timestamp?: number; tamper?: boolean } = {}) => {
    const ev = { id: o.id ?? `evt_fake${++seq}`, object: 'event', type, created: o.created ?? 1_790_000_000 + seq, api_version: Stripe.API_VERSION, livemode: false, data: { object } };
    const payload = JSON.stringify(ev);
    const header = Stripe.webhooks.generateTestHeaderString({ payload, secret: o.secret ?? WEBHOOK_SECRET, ...(o.timestamp ? { timestamp: o.timestamp } : {}) });
    return call('POST', '/v1/billing/stripe/webhook', { rawBody: o.tamper ? payload.replace('"livemode":false', '"livemode":true') : payload, headers: { 'stripe-signature': header } });
  };

  // Checkout: a customer (created once, idempotently), then a subscription-mode session with the trial.
  assertEnvelope(t, await call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'startup', success_url: `${PUBLIC_ORIGIN}/ok` } }), 'invalid_request', 400);
  t.equal(fake.requests.length, 0, 'an unpriced plan never reaches Stripe');
  const co = await call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'pro', success_url: `${PUBLIC_ORIGIN}/ok` } });
  t.equal(co.status, 200);
  t.match(co.json.url, /^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_fake\d+$/);
  t.same(fake.requests.map((r) => `${r.method} ${r.path}`), ['POST /v1/customers', 'POST /v1/checkout/sessions']);
  const [cust, sess] = fake.requests;
  t.equal(cust!.body['metadata[org_id]'], u.orgId);
  t.equal(cust!.idempotencyKey, `computer-customer-${u.orgId}`);
  t.equal(cust!.authorization, `Bearer ${SECRET_KEY}`, 'the key goes to Stripe (and only there)');
  const customerId = (await rig.store.stripe.customer(u.orgId))!.customer_id;
  t.match(customerId, /^cus_fake\d+$/);
  t.same(sess!.body, {
    mode: 'subscription', customer: customerId, client_reference_id: u.orgId,
    'line_items[0][price]': 'price_pro_month', 'line_items[0][quantity]': '1',
    'line_items[1][price]': 'price_compute_metered', 'line_items[2][price]': 'price_egress_metered',
    success_url: `${PUBLIC_ORIGIN}/ok`, cancel_url: `${PUBLIC_ORIGIN}/ok`,
    'metadata[org_id]': u.orgId, 'metadata[plan_id]': 'pro',
    'subscription_data[metadata][org_id]': u.orgId, 'subscription_data[metadata][plan_id]': 'pro', 'subscription_data[trial_period_days]': '14',
  });
  t.equal((await acct()).state, 'unsubscribed', 'nothing moves until Stripe says so');
  const co2 = await call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'pro', success_url: `${PUBLIC_ORIGIN}/ok` } });
  t.equal(co2.status, 200);
  t.equal(fake.requests.filter((r) => r.path === '/v1/customers').length, 1, 'the customer is reused');

  // Signature failures: refused with 400 and nothing recorded or moved.
  const sessionObj = { id: 'cs_test_1', object: 'checkout.session', mode: 'subscription', client_reference_id: u.orgId, customer: customerId, subscription: 'sub_A', metadata: { org_id: u.orgId, plan_id: 'pro' } };
  for (const [what, o] of [
    ['another secret', { secret: 'whsec_someoneElse0123456789' }],
    ['a tampered body', { tamper: true }],
    ['a replayed signature from an hour ago', { timestamp: Math.floor(Date.now() / 1000) - 3600 }],
  ] as const) {
    const r = await deliver('checkout.session.completed', sessionObj, { ...o, id: 'evt_forged' });
    assertEnvelope(t, r, 'invalid_request', 400);
    t.equal(r.json.error.details[0].field, 'stripe-signature', what);
  }
  assertEnvelope(t, await call('POST', '/v1/billing/stripe/webhook', { rawBody: '{"id":"evt_x"}' }), 'invalid_request', 400);
  t.equal((await rig.store.stripe.event('evt_forged')), undefined, 'no forged event recorded');
  t.equal((await acct()).state, 'unsubscribed', 'no forged event applied');

  // The checkout completes: the trial starts (the catalog's 14 days, on our clock).
  const done = await deliver('checkout.session.completed', sessionObj, { id: 'evt_checkout' });
  t.equal(done.status, 200);
  t.same(done.json, { received: true, id: 'evt_checkout', outcome: 'applied' });
  const a1 = await acct();
  t.equal(a1.state, 'trialing');
  t.same(a1.plan, { id: 'pro', name: 'Pro' });
  const replay = await deliver('checkout.session.completed', sessionObj, { id: 'evt_checkout' });
  t.same(replay.json, { received: true, id: 'evt_checkout', outcome: 'duplicate' }, 'a replay is ignored');
  t.equal((await rig.services.billing.events(u.orgId)).length, 1, 'applied once');

  const sub = (status: string, id = 'sub_A') => ({ id, object: 'subscription', status, customer: customerId, metadata: { org_id: u.orgId, plan_id: 'pro' }, items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_pro_month' } }] } });
  const T = 1_800_000_000;
  t.equal((await deliver('customer.subscription.updated', sub('trialing'), { created: T })).json.outcome, 'unchanged');

  // Usage during the trial is reported as meter events, cumulative per period, exactly once.
  const hour = new Date(rig.clock.t).toISOString();
  const add = (meter: 'compute_large_seconds' | 'hot_storage_byte_seconds' | 'egress_bytes', q: bigint, at = hour) =>
    rig.store.usage.add({ org_id: u.orgId, source_id: 'mch_a', machine_id: 'mch_a', template_id: null, meter, size: meter === 'compute_large_seconds' ? 'large' : null, hour: at, quantity: q }, at);
  await add('compute_large_seconds', 7200n);
  await add('hot_storage_byte_seconds', 50n * BigInt(GIB) * 7200n);
  await add('egress_bytes', 3n * BigInt(GIB) + 5n);
  const meterCalls = () => fake.requests.filter((r) => r.path === '/v1/billing/meter_events');
  t.same(await rig.services.stripe!.reportUsage(), { sent: 3, failed: 0 });
  const periodStart = Math.floor(Date.parse(a1.period.start) / 1000);
  t.same(meterCalls().map((r) => [r.body.event_name, r.body['payload[value]'], r.body['payload[stripe_customer_id]'], r.body.identifier]), [
    ['computer_compute', '14400000', customerId, `${u.orgId}:${periodStart}:computer_compute:14400000`],
    ['computer_hot_storage', '100', customerId, `${u.orgId}:${periodStart}:computer_hot_storage:100`],
    ['computer_egress', '3072', customerId, `${u.orgId}:${periodStart}:computer_egress:3072`],
  ]);
  t.same(await rig.services.stripe!.reportUsage(), { sent: 0, failed: 0 }, 'nothing new, nothing sent');
  await add('egress_bytes', BigInt(2 ** 20));
  fake.failNext('/v1/billing/meter_events');
  t.same(await rig.services.stripe!.reportUsage(), { sent: 0, failed: 1 }, 'Stripe down: kept pending');
  await add('egress_bytes', BigInt(2 ** 20));
  t.same(await rig.services.stripe!.reportUsage(), { sent: 2, failed: 0 });
  t.same(meterCalls().slice(3).map((r) => [r.body['payload[value]'], r.body.identifier.split(':').pop()]), [
    ['1', '3073'], ['1', '3073'], ['1', '3074'],
  ], 'the failed delta is resent under the same identifier before the next one');
  t.equal(fake.meterIdentifiers.size, 5, 'Stripe counts five distinct reports');

  // Trial converts at Stripe; then events arrive out of order.
  rig.clock.t += 24 * 3600 * 1000;
  t.equal((await deliver('customer.subscription.updated', sub('active'), { created: T + 10 })).json.outcome, 'applied');
  const a2 = await acct();
  t.equal(a2.state, 'active');
  t.equal(a2.period.start, new Date(rig.clock.t).toISOString(), 'a paid period starts');
  t.equal((await deliver('customer.subscription.updated', sub('past_due'), { created: T + 30 })).json.outcome, 'applied');
  t.equal((await deliver('customer.subscription.updated', sub('active'), { created: T + 20 })).json.outcome, 'stale', 'an older status arriving late is skipped');
  t.equal((await acct()).state, 'past_due');
  t.equal((await deliver('customer.subscription.updated', sub('active', 'sub_OTHER'), { created: T + 40 })).json.outcome, 'ignored', 'another subscription moves nothing');
  t.equal((await deliver('invoice.paid', { id: 'in_1', object: 'invoice' }, { created: T + 41 })).json.outcome, 'ignored');
  t.equal((await deliver('customer.subscription.updated', sub('active'), { created: T + 50 })).json.outcome, 'applied');

  // The trial period's rest is reported when the reporter sees it closed; the new period separately.
  await add('egress_bytes', BigInt(2 ** 20), new Date(rig.clock.t).toISOString());
  t.same(await rig.services.stripe!.reportUsage(), { sent: 1, failed: 0 });
  const last = meterCalls().at(-1)!;
  t.equal(last.body.identifier, `${u.orgId}:${Math.floor(rig.clock.t / 1000)}:computer_egress:1`);
  t.same((await rig.store.stripe.reports(u.orgId)).map((r) => [r.period_start === a1.period.start ? 'trial' : 'paid', r.meter, r.reported, r.closed]), [
    ['trial', 'computer_cold_storage', 0, 1], ['trial', 'computer_compute', 14400000, 1], ['trial', 'computer_egress', 3074, 1], ['trial', 'computer_hot_storage', 100, 1],
    ['paid', 'computer_cold_storage', 0, 0], ['paid', 'computer_compute', 0, 0], ['paid', 'computer_egress', 1, 0], ['paid', 'computer_hot_storage', 0, 0],
  ]);

  // Portal: Stripe's customer portal for the org's customer.
  const portal = await call('POST', '/v1/billing/portal', { cookie: u.cookie, body: { return_url: `${PUBLIC_ORIGIN}/billing` } });
  t.equal(portal.status, 200);
  t.match(portal.json.url, /^https:\/\/billing\.stripe\.test\/p\/session\//);
  t.same(fake.requests.at(-1)!.body, { customer: customerId, return_url: `${PUBLIC_ORIGIN}/billing` });

  t.equal((await deliver('customer.subscription.deleted', sub('canceled'), { created: T + 60 })).json.outcome, 'applied');
  t.equal((await acct()).state, 'canceled');
  // An update of the same second delivered after the deletion: a deleted subscription is terminal.
  t.equal((await deliver('customer.subscription.updated', sub('active'), { created: T + 60 })).json.outcome, 'ignored', 'an update after the deletion moves nothing');
  t.equal((await deliver('customer.subscription.updated', sub('past_due'), { created: T + 61 })).json.outcome, 'ignored', 'nor a later one of the same subscription');
  t.equal((await acct()).state, 'canceled', 'the account stays canceled');
  t.same((await rig.services.billing.events(u.orgId)).map((e) => `${e.type}:${e.to_state}`), [
    'checkout.completed:trialing', 'trial.converted:active', 'payment.failed:past_due', 'payment.succeeded:active', 'subscription.canceled:canceled',
  ]);

  // Resubscribing: no trial this time.
  await call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'developer', success_url: `${PUBLIC_ORIGIN}/ok` } });
  const resub = fake.requests.at(-1)!;
  t.equal(resub.body['line_items[0][price]'], 'price_dev_month');
  t.notOk('subscription_data[trial_period_days]' in resub.body, 'a resubscription has no trial');

  // A subscription seen active before its checkout completed (Stripe does not deliver in order).
  const v = await rig.user('v');
  const vSub = { id: 'sub_V', object: 'subscription', status: 'active', customer: 'cus_elsewhere1', metadata: { org_id: v.orgId, plan_id: 'developer' }, items: { object: 'list', data: [] } };
  t.equal((await deliver('customer.subscription.created', vSub, { created: T + 70 })).json.outcome, 'applied');
  t.same((await rig.services.billing.events(v.orgId)).map((e) => e.to_state), ['trialing', 'active']);
  const vDone = await deliver('checkout.session.completed', { id: 'cs_v', object: 'checkout.session', mode: 'subscription', client_reference_id: v.orgId, customer: 'cus_elsewhere1', subscription: 'sub_V', metadata: { plan_id: 'developer' } }, { created: T + 65 });
  t.equal(vDone.json.outcome, 'unchanged', 'the late checkout event changes nothing');
  t.equal((await rig.store.billing.account(v.orgId))!.plan_id, 'developer');
  // A portal for an account that never checked out.
  const w = await rig.user('w');
  assertEnvelope(t, await call('POST', '/v1/billing/portal', { cookie: w.cookie, body: {} }), 'precondition_failed', 412);

  const everything = bodies.join('\n') + JSON.stringify(rig.logs);
  t.notMatch(everything, /sk_test_51FakeKey/, 'the secret key is never answered or logged');
  t.notMatch(everything, /whsec_testSigning/, 'the signing secret is never answered or logged');
});

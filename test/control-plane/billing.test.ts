import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { createApp } from '../../control-plane/src/app.js';
import { runCli } from '../../control-plane/src/cli.js';
import { z } from 'zod';
import { defineOp } from '../../control-plane/src/api/op.js';
import { IDENTITY_OPS } from '../../control-plane/src/api/v1/index.js';
import { AppError } from '../../shared/errors.js';
import { assertEnvelope, makeRig, PUBLIC_ORIGIN, type Rig } from '../helpers/control-plane.js';

const DAY = 24 * 3600 * 1000;

// Spec "Plan entitlements" table, written out independently of the catalog module.
const SPEC_PLANS: Record<string, Record<string, unknown>> = {
  developer: { running_machines: 3, machines: 5, snapshots_per_machine: 10, templates: 5, members: 5, concurrent_sessions: 10, largest_size: 'standard', included_compute_standard_hours: 120, included_hot_storage_gb: 75, overage_allowed: true },
  pro: { running_machines: 10, machines: 20, snapshots_per_machine: 25, templates: 25, members: 25, concurrent_sessions: 40, largest_size: 'large', included_compute_standard_hours: 400, included_hot_storage_gb: 200, overage_allowed: true },
  startup: { running_machines: 30, machines: 100, snapshots_per_machine: 50, templates: 100, members: 100, concurrent_sessions: 120, largest_size: 'large', included_compute_standard_hours: 2000, included_hot_storage_gb: 1024, overage_allowed: true },
  enterprise: { running_machines: null, machines: null, snapshots_per_machine: null, templates: null, members: null, concurrent_sessions: null, largest_size: null, included_compute_standard_hours: null, included_hot_storage_gb: null, overage_allowed: true },
};

async function checkout(rig: Rig, cookie: string, plan: string) {
  const co = await rig.call('POST', '/v1/billing/checkout', { cookie, body: { plan_id: plan, success_url: `${PUBLIC_ORIGIN}/welcome?x=1` } });
  return co;
}

t.test('plans catalog', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const r = await rig.call('GET', '/v1/plans');
  t.equal(r.status, 200, 'public');
  t.same(r.json.data.map((p: any) => p.id), ['developer', 'pro', 'startup', 'enterprise']);
  t.type(r.json.catalog_version, 'string');
  t.equal(r.json.next_cursor, null);
  for (const p of r.json.data) {
    t.same(p.entitlements, SPEC_PLANS[p.id], `${p.id} entitlements match the spec`);
    if (p.id === 'enterprise') t.equal(p.price, null, 'negotiated');
    else {
      t.match(p.price.amount, /^\d+\.\d\d$/);
      t.not(Number(p.price.amount), 0, 'no zero-price plan');
    }
  }
  t.same(r.json.sizes.map((s: any) => [s.id, s.vcpu, s.memory_mb, s.disk_gb, s.weight_milli]), [
    ['small', 2, 4096, 10, 500],
    ['standard', 4, 8192, 25, 1000],
    ['large', 8, 16384, 50, 2000],
  ]);
  const pro = r.json.data.find((p: any) => p.id === 'pro');
  t.same(pro.trial, { days: 14, included_compute_standard_hours: 56, included_egress_gb: 50, overage_allowed: false });
  const dev = r.json.data.find((p: any) => p.id === 'developer');
  t.same(dev.trial, { days: 14, included_compute_standard_hours: 120, included_egress_gb: 0, overage_allowed: true });
  const one = await rig.call('GET', '/v1/plans/startup');
  t.equal(one.status, 200);
  t.same(one.json.entitlements, SPEC_PLANS.startup);
  assertEnvelope(t, await rig.call('GET', '/v1/plans/free'), 'not_found', 404);
});

t.test('account states: checkout → trialing → provider events', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const u = await rig.user('o');
  // Browser sessions last 14 days, like the trial: read through a key, which does not expire, once the account
  // may create one (an unsubscribed account creates nothing: 402 subscription).
  const early = await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'r', scopes: [] } });
  assertEnvelope(t, early, 'quota_exceeded', 402);
  t.same(early.json.error.quota, { limit: 'subscription', current: 0, maximum: 0, plan_id: 'none', upgrade_url: null });
  let key: string | null = null;
  const acct = async () => (await rig.call('GET', '/v1/billing', key ? { key } : { cookie: u.cookie })).json;

  const a0 = await acct();
  t.equal(a0.state, 'unsubscribed');
  t.equal(a0.plan, null);
  t.notOk('trial_ends_at' in a0);
  t.same(a0.limits.map((l: any) => l.key), ['running_machines', 'machines', 'templates', 'members', 'concurrent_sessions', 'snapshots_per_machine']);
  for (const l of a0.limits) t.equal(l.limit, 0, `unsubscribed grants no ${l.key}`);
  t.equal(a0.limits.find((l: any) => l.key === 'members').current, 1);

  // Refusals before anything changes.
  const openRedirect = await rig.call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'pro', success_url: 'https://evil.example/x' } });
  assertEnvelope(t, openRedirect, 'invalid_request', 400);
  t.equal(openRedirect.json.error.details[0].field, 'success_url');
  const badPlan = await rig.call('POST', '/v1/billing/checkout', { cookie: u.cookie, body: { plan_id: 'gold', success_url: `${PUBLIC_ORIGIN}/x` } });
  assertEnvelope(t, badPlan, 'invalid_request', 400);
  t.equal(badPlan.json.error.details[0].field, 'plan_id');
  const ent = await checkout(rig, u.cookie, 'enterprise');
  assertEnvelope(t, ent, 'precondition_failed', 412);
  t.equal((await acct()).state, 'unsubscribed');

  const co = await checkout(rig, u.cookie, 'pro');
  t.equal(co.status, 200);
  t.match(co.json.url, /^http:\/\/cp\.test\/v1\/billing\/checkout\/[0-9A-Za-z]{43}\/complete$/);
  const path = new URL(co.json.url).pathname;
  const done = await rig.call('GET', path);
  t.equal(done.status, 303);
  t.equal(done.headers.get('location'), `${PUBLIC_ORIGIN}/welcome?x=1`);
  assertEnvelope(t, await rig.call('GET', path), 'not_found', 404);
  key = (await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'r', scopes: [] } })).json.secret;

  const a1 = await acct();
  t.equal(a1.state, 'trialing');
  t.same(a1.plan, { id: 'pro', name: 'Pro' });
  t.equal(a1.trial_ends_at, new Date(rig.clock.t + 14 * DAY).toISOString());
  t.same(a1.trial, { days: 14, included_compute_standard_hours: 56, included_egress_gb: 50, overage_allowed: false });
  t.equal(a1.limits.find((l: any) => l.key === 'machines').limit, 20);
  assertEnvelope(t, await checkout(rig, u.cookie, 'startup'), 'conflict', 409);

  // Trial end: the built-in provider converts the account (it takes no money that could fail).
  rig.clock.t += 14 * DAY;
  const a2 = await acct();
  const relog = await rig.call('POST', '/v1/auth/login', { body: { email: u.email, password: u.password } });
  u.cookie = relog.headers.get('set-cookie')!.split(';')[0]!;
  t.equal(a2.state, 'active');
  t.notOk('trial_ends_at' in a2, 'trial_ends_at only while trialing');
  t.same(a2.period, { start: new Date(rig.clock.t).toISOString(), end: new Date(rig.clock.t + 30 * DAY).toISOString() });

  const b = rig.services.builtin!;
  await b.emit(u.orgId, 'payment.failed');
  const a3 = await acct();
  t.equal(a3.state, 'past_due');
  t.same(a3.plan, { id: 'pro', name: 'Pro' }, 'past_due keeps the plan');
  t.equal(a3.limits.find((l: any) => l.key === 'machines').limit, 20);
  await t.resolves(rig.services.quotas.check(u.orgId, 'machines', { current: 0 }), 'past_due still creates');
  await b.emit(u.orgId, 'payment.succeeded');
  t.equal((await acct()).state, 'active');

  await t.rejects(b.emit(u.orgId, 'trial.converted'), { code: 'conflict' }, 'illegal move refused');

  // Cancel through the portal page.
  const portal = await rig.call('POST', '/v1/billing/portal', { cookie: u.cookie, body: { return_url: `${PUBLIC_ORIGIN}/billing` } });
  t.equal(portal.status, 200);
  const ppath = new URL(portal.json.url).pathname;
  const page = await rig.call('GET', ppath);
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /text\/html/);
  t.match(page.text, /<span id="state">active<\/span>/);
  t.match(page.text, /Cancel subscription/);
  t.equal(page.headers.get('content-security-policy'), "default-src 'none'; form-action 'self'; frame-ancestors 'none'", 'the portal page may not be framed');
  t.equal(page.headers.get('x-frame-options'), 'DENY');
  assertEnvelope(t, await rig.call('POST', `${ppath}/cancel`, { origin: 'https://evil.example' }), 'permission_denied', 403);
  const cancel = await rig.call('POST', `${ppath}/cancel`, { origin: PUBLIC_ORIGIN });
  t.equal(cancel.status, 303);
  t.equal((await acct()).state, 'canceled');
  t.notMatch((await rig.call('GET', ppath)).text, /Cancel subscription/);

  const refused = await (async () => {
    try {
      await rig.services.quotas.check(u.orgId, 'machines', { current: 0 });
    } catch (e) {
      return e as AppError;
    }
    return null;
  })();
  t.equal(refused?.code, 'quota_exceeded');
  t.same(refused?.quota, { limit: 'subscription', current: 0, maximum: 0, plan_id: 'pro', upgrade_url: null });
  for (const l of (await acct()).limits) t.equal(l.limit, 0, 'canceled grants nothing');

  // Subscribing again restores access (no second trial).
  const again = await checkout(rig, u.cookie, 'startup');
  t.equal((await rig.call('GET', new URL(again.json.url).pathname)).status, 303);
  const a4 = await acct();
  t.equal(a4.state, 'active');
  t.equal(a4.plan.id, 'startup');
  t.same((await rig.services.billing.events(u.orgId)).map((e) => `${e.from_state}>${e.to_state}`), [
    'unsubscribed>trialing', 'trialing>active', 'active>past_due', 'past_due>active', 'active>canceled', 'canceled>active',
  ]);

  // Links expire; portal links of one account show only that account.
  const late = await rig.call('POST', '/v1/billing/portal', { cookie: u.cookie, body: {} });
  rig.clock.t += 3600 * 1000;
  assertEnvelope(t, await rig.call('GET', new URL(late.json.url).pathname), 'not_found', 404);
  assertEnvelope(t, await rig.call('GET', '/v1/billing/checkout/nonsense/complete'), 'not_found', 404);
});

t.test('trial payment failure and trial cancel', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const u = await rig.user('o');
  const co = await checkout(rig, u.cookie, 'developer');
  await rig.call('GET', new URL(co.json.url).pathname);
  const a = await rig.call('GET', '/v1/billing', { cookie: u.cookie });
  t.same(a.json.trial, { days: 14, included_compute_standard_hours: 120, included_egress_gb: 0, overage_allowed: true }, 'developer trial differs');
  await rig.services.builtin!.emit(u.orgId, 'trial.payment_failed');
  t.equal((await rig.call('GET', '/v1/billing', { cookie: u.cookie })).json.state, 'past_due');
  await rig.services.builtin!.emit(u.orgId, 'subscription.canceled');
  t.equal((await rig.call('GET', '/v1/billing', { cookie: u.cookie })).json.state, 'canceled');
});

t.test('quota engine: exact error shape over HTTP, limits, enterprise', async (t) => {
  const rig = await makeRig({ env: { UPGRADE_URL: 'https://cp.test/upgrade' } });
  t.teardown(() => rig.close());
  let running = 0;
  rig.services.quotas.registerCounter('running_machines', async () => running);
  const start = defineOp({
    name: 'probe.start',
    method: 'post',
    path: '/probe/start',
    auth: 'any',
    permission: 'machines:control',
    responses: { 200: z.object({ running: z.number().int() }) },
    async handler(c, s) {
      await s.quotas.check(c.get('principal').org_id!, 'running_machines');
      running++;
      return c.json({ running });
    },
  });
  const app = createApp({ services: rig.services, log: () => {}, ops: [...IDENTITY_OPS, start] });
  const u = await rig.user('q');
  const post = async () => {
    const r = await app.request('/v1/probe/start', { method: 'POST', headers: { cookie: u.cookie, origin: PUBLIC_ORIGIN } }, { clientIp: '192.0.2.1' });
    return { status: r.status, headers: r.headers, text: '', json: (await r.json()) as any };
  };

  const unsub = await post();
  assertEnvelope(t, unsub, 'quota_exceeded', 402);
  t.same(unsub.json.error.quota, { limit: 'subscription', current: 0, maximum: 0, plan_id: 'none', upgrade_url: 'https://cp.test/upgrade' });

  const co = await checkout(rig, u.cookie, 'developer');
  await rig.call('GET', new URL(co.json.url).pathname);
  for (let i = 1; i <= 3; i++) t.equal((await post()).json.running, i);
  const over = await post();
  assertEnvelope(t, over, 'quota_exceeded', 402);
  t.same(over.json.error, {
    code: 'quota_exceeded',
    message: over.json.error.message,
    request_id: over.headers.get('x-request-id'),
    details: [],
    quota: { limit: 'running_machines', current: 3, maximum: 3, plan_id: 'developer', upgrade_url: 'https://cp.test/upgrade' },
  });
  t.same(Object.keys(over.json.error.quota), ['limit', 'current', 'maximum', 'plan_id', 'upgrade_url']);
  const limits = (await rig.call('GET', '/v1/billing', { cookie: u.cookie })).json.limits;
  t.same(limits.find((l: any) => l.key === 'running_machines'), { key: 'running_machines', current: 3, limit: 3 });

  // `adding` and caller-supplied counts.
  await t.rejects(rig.services.quotas.check(u.orgId, 'machines', { current: 4, adding: 2 }), { code: 'quota_exceeded' });
  await t.resolves(rig.services.quotas.check(u.orgId, 'machines', { current: 4, adding: 1 }));
  await t.rejects(rig.services.quotas.check(u.orgId, 'snapshots_per_machine', { current: 10 }), { quota: { limit: 'snapshots_per_machine', maximum: 10 } } as object as Error);

  // Enterprise: refused at checkout without an agreement; with one, its numbers apply; lapsed → refused.
  const e = await rig.user('ent');
  assertEnvelope(t, await checkout(rig, e.cookie, 'enterprise'), 'precondition_failed', 412);
  const now = new Date(rig.clock.t);
  await rig.services.billing.setOverride(e.orgId, {
    running_machines: 200, machines: 500, snapshots_per_machine: 100, templates: 300, members: 400, concurrent_sessions: 800,
    largest_size: 'large', included_compute_standard_hours: 10000, included_hot_storage_gb: 5000, overage_allowed: true,
  }, now, new Date(now.getTime() + 30 * DAY));
  const eco = await checkout(rig, e.cookie, 'enterprise');
  t.equal(eco.status, 200);
  await rig.call('GET', new URL(eco.json.url).pathname);
  const ekey = (await rig.call('POST', '/v1/api-keys', { cookie: e.cookie, body: { name: 'r', scopes: [] } })).json.secret;
  rig.clock.t += 14 * DAY; // trial converts
  const ea = (await rig.call('GET', '/v1/billing', { key: ekey })).json;
  t.equal(ea.state, 'active');
  t.equal(ea.limits.find((l: any) => l.key === 'machines').limit, 500);
  await t.resolves(rig.services.quotas.check(e.orgId, 'machines', { current: 499 }));
  rig.clock.t += 16 * DAY; // agreement lapses
  let err: AppError | null = null;
  try {
    await rig.services.quotas.check(e.orgId, 'machines', { current: 0 });
  } catch (x) {
    err = x as AppError;
  }
  t.equal(err?.code, 'quota_exceeded');
  t.same(err?.quota, { limit: 'subscription', current: 0, maximum: null, plan_id: 'enterprise', upgrade_url: 'https://cp.test/upgrade' });
  t.equal((await rig.call('GET', '/v1/billing', { key: ekey })).json.limits.find((l: any) => l.key === 'machines').limit, null);
});

t.test('operator CLI drives provider events and agreements on the same database', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const u = await rig.user('cli');
  const co = await checkout(rig, u.cookie, 'pro');
  await rig.call('GET', new URL(co.json.url).pathname);
  const key = (await rig.call('POST', '/v1/api-keys', { cookie: u.cookie, body: { name: 'r', scopes: [] } })).json.secret;
  const out: string[] = [];
  const run = (...argv: string[]) => runCli(argv, rig.config, (s) => out.push(s));
  t.equal(await run('billing-event', u.orgId, 'trial.payment_failed'), 0);
  t.equal((await rig.call('GET', '/v1/billing', { key })).json.state, 'past_due', 'the server sees the CLI write');
  t.equal(await run('billing-event', u.orgId, 'trial.converted'), 1, 'illegal move refused');
  t.match(out.at(-1), /^conflict: /);
  t.equal(await run('billing-event', u.orgId, 'made.up'), 2);
  t.equal(await run('billing-event', 'org_nope', 'payment.failed'), 2);
  const file = path.join(rig.dir, 'agreement.json');
  const ent = { running_machines: 7, machines: 8, snapshots_per_machine: 9, templates: 10, members: 11, concurrent_sessions: 12, largest_size: 'large', included_compute_standard_hours: 13, included_hot_storage_gb: 14, overage_allowed: false };
  fs.writeFileSync(file, JSON.stringify(ent));
  t.equal(await run('agreement', u.orgId, file, new Date(rig.clock.t - 1000).toISOString()), 0);
  t.equal((await rig.call('GET', '/v1/billing', { key })).json.limits.find((l: any) => l.key === 'machines').limit, 8, 'agreement overrides the plan');
  fs.writeFileSync(file, JSON.stringify({ ...ent, machines: -1 }));
  t.equal(await run('agreement', u.orgId, file, new Date(rig.clock.t).toISOString()), 1, 'invalid entitlements refused');
});

t.test('another billing provider: the built-in pages answer unsupported_operation', async (t) => {
  const calls: string[] = [];
  const rig = await makeRig({
    services: {
      // A real provider would keep the sink and call sink.apply from its webhook route.
      billingProvider: () => ({
        name: 'test',
        async createCheckout(r) {
          calls.push(`checkout ${r.planId}`);
          return { url: 'https://pay.example/c/1' };
        },
        async createPortal() {
          return { url: 'https://pay.example/p/1' };
        },
        async sync() {
          return false;
        },
        async syncAll() {},
      }),
    },
  });
  t.teardown(() => rig.close());
  const u = await rig.user('p');
  const co = await checkout(rig, u.cookie, 'pro');
  t.same(co.json, { url: 'https://pay.example/c/1' });
  t.same(calls, ['checkout pro']);
  t.equal(rig.services.builtin, null);
  assertEnvelope(t, await rig.call('GET', '/v1/billing/checkout/whatever/complete'), 'unsupported_operation', 501);
  assertEnvelope(t, await rig.call('GET', '/v1/billing/portal/whatever'), 'unsupported_operation', 501);
  await rig.services.billing.sink.apply(u.orgId, 'checkout.completed', { plan_id: 'pro' });
  t.equal((await rig.call('GET', '/v1/billing', { cookie: u.cookie })).json.state, 'trialing', 'events from any provider use the same table');
});

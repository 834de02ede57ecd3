/**
 * Unique-constraint races (issue 24 item 2): a check-then-write whose check passes in two processes at once ends in
 * the unique index refusing the second write (PostgreSQL 23505). That must reach the caller as what a sequential
 * second call gets, never a 500: the check's own conflict (signup, machine names), or — where the second call is not
 * refused — its answer (a port published again: the existing preview; a secret stored again: its next version; a
 * second checkout: the organization's one Stripe customer). On PostgreSQL with two real processes, the race made
 * certain by holding the table's writes (helpers/pg-hold.ts); on SQLite in one process (the check itself refuses).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { newKeyring } from '../../../control-plane/src/secrets/crypto.js';
import { KeyringFile } from '../../../control-plane/src/secrets/keyring-file.js';
import { startFakeStripe } from '../../helpers/fake-stripe.js';
import { PUBLIC_ORIGIN } from '../../helpers/control-plane.js';
import { race, startServed, type Engine, type HttpReply } from '../../helpers/served-processes.js';

const statuses = (rs: HttpReply[]) => rs.map((r) => r.status).sort((a, b) => a - b);

for (const engine of ['postgres', 'sqlite'] as Engine[]) {
  t.test(`${engine}: unique races end in one winner and the check's conflict`, async (t) => {
    // Both processes read one operator-named keyring (secrets are stored in the race below) and serve previews.
    const keys = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-races-keyring-'));
    t.teardown(() => fs.rmSync(keys, { recursive: true, force: true }));
    new KeyringFile(path.join(keys, 'keyring.json')).createIfAbsent(newKeyring(new Date()));
    const s = await startServed(t, engine, { env: { PREVIEW_DOMAIN: 'preview.test', SECRETS_KEYRING: path.join(keys, 'keyring.json') } });

    await t.test('two signups with one e-mail address', async (t) => {
      const email = `same-${engine}@example.com`;
      const replies = await race(s, 'users', 2, (b, i) =>
        s.call(b, 'POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery' }, ip: `198.51.100.${i + 1}` }));
      t.same(statuses(replies), [201, 409], JSON.stringify(replies.map((r) => r.json)));
      const loser = replies.find((r) => r.status === 409)!;
      t.equal(loser.json.error.code, 'conflict');
      t.equal(loser.json.error.message, 'An account with this e-mail address already exists.');
    });

    const { key, cookie } = await s.tenant('pro');
    await t.test('two creates with one machine name', async (t) => {
      const replies = await race(s, 'machines', 2, (b) => s.call(b, 'POST', '/v1/machines', { key, body: { name: 'twin', start: false } }));
      t.same(statuses(replies), [201, 409], JSON.stringify(replies.map((r) => r.json)));
      t.equal(replies.find((r) => r.status === 409)!.json.error.message, 'A machine named twin already exists.');
    });

    await t.test('two renames to one machine name', async (t) => {
      const ids: string[] = [];
      for (const i of [0, 1]) ids.push((await s.call(s.base(i), 'POST', '/v1/machines', { key, body: { start: false } })).json.id);
      const replies = await race(s, 'machines', 2, (b, i) => s.call(b, 'PATCH', `/v1/machines/${ids[i]}`, { key, body: { name: 'renamed' } }));
      t.same(statuses(replies), [200, 409], JSON.stringify(replies.map((r) => r.json)));
      const loser = replies.find((r) => r.status === 409)!;
      t.equal(loser.json.error.code, 'conflict');
      t.equal(loser.json.error.message, 'A machine named renamed already exists.');
    });

    await t.test('two publishes of one port: the preview published once, the loser answered with it', async (t) => {
      const id = (await s.call(s.base(0), 'POST', '/v1/machines', { key, body: { start: false } })).json.id as string;
      const replies = await race(s, 'previews', 2, (b) => s.call(b, 'POST', `/v1/machines/${id}/ports`, { cookie, body: { port: 8080, access: 'public' } }));
      t.same(statuses(replies), [200, 201], JSON.stringify(replies.map((r) => r.json)));
      t.equal(replies[0]!.json.id, replies[1]!.json.id, 'one preview');
      const list = await s.call(s.base(1), 'GET', `/v1/machines/${id}/ports`, { cookie });
      t.same(list.json.data.map((p: { port: number }) => p.port), [8080]);
    });

    await t.test('two first stores of one secret, then two replaces: versions 1 and 2, then 3 and 4, as one after the other', async (t) => {
      const id = (await s.call(s.base(0), 'POST', '/v1/machines', { key, body: { start: false } })).json.id as string;
      const replies = await race(s, 'machine_secrets', 2, (b, i) =>
        s.call(b, 'PUT', `/v1/machines/${id}/secrets`, { cookie, body: { name: 'API_TOKEN', value: `value-${i}` } }));
      t.same(statuses(replies), [200, 200], JSON.stringify(replies.map((r) => r.json)));
      t.same(replies.map((r) => r.json.version).sort(), [1, 2]);
      const list = await s.call(s.base(1), 'GET', `/v1/machines/${id}/secrets`, { cookie });
      t.same(list.json.data.map((x: { name: string; version: number }) => [x.name, x.version]), [['API_TOKEN', 2]]);

      // Two replaces of it: the loser's compare-and-set on version 2 finds 3 and its transaction runs again (version 4),
      // never answering 200 for a value it did not store.
      const again = await race(s, 'machine_secrets', 2, (b, i) =>
        s.call(b, 'PUT', `/v1/machines/${id}/secrets`, { cookie, body: { name: 'API_TOKEN', value: `again-${i}` } }));
      t.same(statuses(again), [200, 200], JSON.stringify(again.map((r) => r.json)));
      t.same(again.map((r) => r.json.version).sort(), [3, 4]);
    });
  });

  t.test(`${engine}: two first checkouts of one organization end with its one Stripe customer`, async (t) => {
    const fake = await startFakeStripe();
    t.teardown(fake.close);
    const s = await startServed(t, engine, {
      env: {
        BILLING_PROVIDER: 'stripe', STRIPE_SECRET_KEY: 'sk_test_51FakeKeyForTheLoopbackFakeOnly0123456789',
        STRIPE_WEBHOOK_SECRET: 'whsec_testSigningSecret0123456789abcdef', STRIPE_PRICES: 'pro=price_pro_month',
      },
      stripeClient: fake.client,
    });
    const su = await s.call(s.base(0), 'POST', '/v1/auth/signup', { body: { email: `stripe-${engine}@example.com`, password: 'correct horse battery' } });
    t.equal(su.status, 201);
    const cookie = su.cookie!;
    const replies = await race(s, 'stripe_customers', 2, (b) =>
      s.call(b, 'POST', '/v1/billing/checkout', { cookie, body: { plan_id: 'pro', success_url: `${PUBLIC_ORIGIN}/ok` } }));
    t.same(statuses(replies), [200, 200], JSON.stringify(replies.map((r) => r.json)));
    // Both sessions were opened for one customer, and the portal (which reads the stored one) names it too.
    const portal = await s.call(s.base(1), 'POST', '/v1/billing/portal', { cookie, body: {} });
    t.equal(portal.status, 200, JSON.stringify(portal.json));
    const customers = fake.requests.filter((r) => r.path === '/v1/checkout/sessions' || r.path === '/v1/billing_portal/sessions').map((r) => r.body.customer);
    t.equal(customers.length, 3);
    t.match(customers[0], /^cus_fake\d+$/);
    t.same(customers, [customers[0], customers[0], customers[0]]);
  });
}

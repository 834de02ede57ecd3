/**
 * The dashboard served by the control plane (fake substrate: no desktop), in the system Chromium: the page's
 * security headers, the SPA fallback, sign up → trial checkout → create a machine → lifecycle, API keys
 * (shown once), sign out and in, at 1280 and 390 px without horizontal overflow, every control named, no
 * console errors.
 */
import t from 'tap';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { builtDashboard, dashboardBrowser, overflowsX, unnamedControls } from '../helpers/dashboard.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';

const dashboardDir = await builtDashboard();
const rig = await makeMachinesRig({ substrate: new FakeSubstrate(), dashboardDir, services: { readyProbe: false } });
t.teardown(() => rig.close());
const served = await serveWithGateway(rig);
t.teardown(() => served.close());
const b = await dashboardBrowser(t, served.port);
const URL0 = 'http://cp.test';

t.test('the page, its headers and the SPA fallback', async (t) => {
  const res = await fetch(`http://127.0.0.1:${served.port}/machines/mch_x/files`);
  t.equal(res.status, 200);
  const csp = res.headers.get('content-security-policy') ?? '';
  t.match(csp, /script-src 'self'(;|$)/, 'scripts only from our origin');
  t.match(csp, /connect-src 'self' ws:\/\/cp\.test/);
  t.match(csp, /frame-ancestors 'none'/);
  const html = await res.text();
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
  const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
  const js = await fetch(`http://127.0.0.1:${served.port}${asset}`);
  t.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
  t.equal((await fetch(`http://127.0.0.1:${served.port}/assets/nope.js`)).status, 404, 'a missing asset is not the page');
  const api404 = await fetch(`http://127.0.0.1:${served.port}/v1/nope`);
  t.equal(api404.status, 404);
  t.equal(((await api404.json()) as { error: { code: string } }).error.code, 'not_found', 'the API keeps its JSON 404');
});

t.test('sign up, trial checkout, machines, keys, sign out and in', async (t) => {
  const { page } = await b.page();
  await page.goto(`${URL0}/`);
  await page.waitForURL(`${URL0}/signin`);
  await page.getByRole('link', { name: 'Sign up' }).click();
  const email = `dash-${Date.now()}@example.com`;
  await page.getByLabel('Name').fill('Dash Board');
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel(/^Password/).fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(`${URL0}/billing`);
  t.same(await page.evaluate('({ ls: localStorage.length, ss: sessionStorage.length, cookie: document.cookie })'), { ls: 0, ss: 0, cookie: '' },
    'nothing in storage, the session cookie is HttpOnly');
  await page.getByRole('button', { name: /^Start 14-day trial of Pro$/ }).click();
  await page.waitForURL(`${URL0}/billing`);
  await page.locator('[data-billing-state="trialing"]').waitFor();
  t.same(await unnamedControls(page), [], 'billing: every control has a name');
  await page.getByRole('link', { name: 'Machines' }).click();
  await page.getByLabel('Name').fill('fake-one');
  await page.getByRole('button', { name: 'Create machine' }).click();
  await page.getByRole('link', { name: 'fake-one', exact: true }).waitFor();
  await page.locator('[data-state="running"]').first().waitFor();
  await page.getByRole('button', { name: 'Stop fake-one' }).click();
  await page.locator('[data-state="stopped"]').first().waitFor();
  await page.getByRole('button', { name: 'Start fake-one', exact: true }).click();
  await page.locator('[data-state="running"]').first().waitFor();
  t.same(await unnamedControls(page), [], 'machines: every control has a name');

  await page.getByRole('link', { name: 'Organization' }).click();
  await page.getByLabel('Key name').fill('ci key');
  await page.getByRole('button', { name: 'Create API key' }).click();
  const secret = await page.locator('[data-secret]').textContent();
  t.match(secret, /^sk_[A-Za-z0-9]{40}$/, 'the secret is shown once');
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByRole('cell', { name: 'ci key', exact: true }).waitFor();
  t.notMatch(await page.content(), secret!, 'and gone from the page afterwards');
  t.same(await unnamedControls(page), [], 'organization: every control has a name');

  // Usage: the running machine's seconds recorded by a metering flush show in the summary and the chart.
  // Metering counts whole seconds: flush until the running machine's first second is recorded.
  const cookie = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
  const hour = new Date();
  hour.setUTCMinutes(0, 0, 0);
  const range = `start=${new Date(hour.getTime() - 3600_000).toISOString()}&end=${new Date(hour.getTime() + 3600_000).toISOString()}`;
  for (let i = 0; i < 40; i++) {
    await rig.services.metering.flush();
    if ((await rig.call('GET', `/v1/usage/series?${range}`, { cookie })).json?.data?.length) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  await page.getByRole('link', { name: 'Billing' }).click();
  await page.getByRole('table', { name: 'Usage summary' }).waitFor();
  await page.locator('.uplot canvas').waitFor();
  t.pass('the usage chart is drawn');

  // Another organization invites this user: accepting puts it in the switcher, switching shows its machines.
  const other = await rig.tenant('pro');
  const inv = await rig.call('POST', '/v1/invitations', { cookie: other.cookie, body: { email, role: 'member' } });
  t.equal(inv.status, 201);
  await page.getByRole('link', { name: 'Organization' }).click();
  await page.getByLabel('Invitation token').fill(inv.json.token);
  await page.getByRole('button', { name: 'Accept invitation' }).click();
  await page.getByRole('status').filter({ hasText: /^You joined/ }).waitFor();
  const switcher = page.getByRole('combobox', { name: 'Organization' });
  t.equal(await switcher.locator('option').count(), 2, 'the switcher offers both organizations');
  await switcher.selectOption(other.orgId);
  await page.getByRole('heading', { name: 'Machines' }).waitFor();
  await page.getByText('No machines yet.').waitFor();
  t.equal(await switcher.inputValue(), other.orgId, 'switched: the other organization has no machines');
  await switcher.selectOption({ index: 0 });
  await page.getByRole('link', { name: 'fake-one', exact: true }).waitFor();

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(`${URL0}/signin`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('link', { name: 'fake-one', exact: true }).waitFor();
  await page.context().close();
});

t.test('1280 and 390 px wide without horizontal overflow', async (t) => {
  const email = `narrow-${Date.now()}@example.com`;
  const su = await rig.call('POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery' }, ip: '203.0.113.77' });
  t.equal(su.status, 201);
  for (const width of [1280, 390]) {
    const { context, page } = await b.page({ width, height: 800 });
    await page.goto(`${URL0}/signin`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('correct horse battery');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Machines' }).waitFor();
    for (const p of ['/', '/billing', '/organization']) {
      await page.goto(`${URL0}${p}`);
      await page.getByRole('heading').first().waitFor();
      await page.waitForLoadState('networkidle');
      t.equal(await overflowsX(page), false, `${p} at ${width} px`);
      t.same(await unnamedControls(page), [], `${p} at ${width} px: every control named`);
    }
    await context.close();
  }
});

t.test('no console errors', async (t) => {
  t.same(b.errors, []);
});

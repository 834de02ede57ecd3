/**
 * The dashboard's live parts in the system Chromium against the control plane on fake machines whose
 * in-process agents serve a desktop that starts down (issue 21): taking control holds through the re-render
 * that ends it and a loss is shown even when nothing is being typed; a new machine's thumbnail is asked for
 * only once its desktop is up (machine.ready) and nothing is left loading across sign-out; a quota refusal is
 * rendered from its `quota`. Every console error fails the file, except the quota refusals this test provokes.
 */
import t from 'tap';
import type { Route } from 'playwright-core';
import { builtDashboard, dashboardBrowser } from '../helpers/dashboard.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';

const dashboardDir = await builtDashboard();
const fake = fakeSubstrateWithAgents({ desktopsStartDown: true });
const rig = await makeMachinesRig({ substrate: fake.substrate, dashboardDir, services: { readyProbe: { intervalMs: 100, timeoutMs: 600_000 } } });
t.teardown(async () => {
  fake.close();
  await rig.close();
});
const served = await serveWithGateway(rig);
t.teardown(() => served.close());
const b = await dashboardBrowser(t, served.port);
const URL0 = 'http://cp.test';

/** A page signed in as the tenant (its session cookie in the browser context). */
async function signedIn(cookie: string) {
  const { context, page } = await b.page({ width: 1280, height: 900 });
  page.setDefaultTimeout(60_000);
  await context.addCookies([{ name: 'computer_session', value: cookie.slice('computer_session='.length), domain: 'cp.test', path: '/' }]);
  return { context, page };
}

t.test('taking control holds through the re-render that ends it, and a loss is shown', async (t) => {
  const ten = await rig.tenant('pro');
  const id = (await rig.call('POST', '/v1/machines', { key: ten.key, body: { name: 'held' } })).json.id as string;
  const { context, page } = await signedIn(ten.cookie);
  await page.goto(`${URL0}/machines/${id}`);
  await page.getByRole('button', { name: 'Take control' }).click();
  await page.locator('[data-control="control"]').waitFor();
  // The second click of a double click lands where Take control was: on Release since the re-render.
  await page.mouse.down({ clickCount: 2 });
  await page.mouse.up({ clickCount: 2 });
  // Events arrive right after the takeover (machine.updated, the lease's own): the page re-renders on them.
  for (let i = 0; i < 3; i++) t.equal((await rig.call('PATCH', `/v1/machines/${id}`, { key: ten.key, body: { metadata: { n: String(i) } } })).status, 200);
  await page.getByRole('img', { name: 'Screen of held' }).click();
  await page.keyboard.type('kept');
  // Until the machine has it all, or the page stopped being in control (the slip).
  const control = () => page.locator('[data-control]').getAttribute('data-control');
  while (!fake.desktopOf(id).typed.join('').includes('kept') && (await control()) === 'control') await new Promise((r) => setTimeout(r, 100));
  t.equal(await control(), 'control', 'still in control');
  t.equal(fake.desktopOf(id).typed.join(''), 'kept', 'typing reaches the machine');
  const lease = (await rig.call('GET', `/v1/machines/${id}/input-lease`, { key: ten.key })).json;
  t.equal(lease.held, true, 'the lease is still held');
  t.equal(lease.holder.type, 'human', 'by the page\'s human session');

  // Control taken anew (a fresh input socket, nothing sent on it), then an agent takes over while the person
  // types nothing: the page says so at once, with who and why (the input channel alone would say it only
  // when the next input is refused).
  await page.getByRole('button', { name: 'Release' }).click();
  await page.locator('[data-control="view"]').waitFor();
  await page.getByRole('button', { name: 'Take control' }).click();
  await page.locator('[data-control="control"]').waitFor();
  const agent = (await rig.call('POST', '/v1/sessions', { key: ten.key, body: { machine_id: id, type: 'agent' } })).json.id as string;
  t.equal((await rig.call('POST', `/v1/machines/${id}/input-lease`, { key: ten.key, body: { session_id: agent, force: true } })).status, 200);
  await page.locator('[data-control="lost"]').waitFor();
  t.equal(await page.locator('[data-control="lost"]').textContent(),
    `Control lost: held by an agent session (${agent}) opened by an API key ${ten.keyId} (lease revoked)`);
  t.ok(await page.getByRole('button', { name: 'Take control' }).isEnabled(), 'and control can be taken again');
  await context.close();
});

t.test('a new machine\'s thumbnail waits for its desktop, and sign-out leaves nothing loading', async (t) => {
  const ten = await rig.tenant('pro');
  const { context, page } = await signedIn(ten.cookie);
  const shots: string[] = [];
  page.on('request', (r) => {
    if (/\/screenshot\?/.test(r.url())) shots.push(r.url());
  });
  await page.goto(`${URL0}/`);
  await page.getByLabel('Name').fill('thumb');
  const created = page.waitForResponse((r) => r.url().endsWith('/v1/machines') && r.request().method() === 'POST');
  // The card reads the machine's events (no machine.ready yet) and shows the desktop starting.
  const eventsRead = page.waitForResponse((r) => /\/v1\/machines\/mch_[a-z0-9]+\/events\?/.test(r.url()));
  await page.getByRole('button', { name: 'Create machine' }).click();
  const id = ((await (await created).json()) as { id: string }).id;
  t.match((await eventsRead).url(), `/v1/machines/${id}/events?`);
  await page.locator('.card', { hasText: 'thumb' }).getByText('desktop starting…').waitFor();
  t.same(shots, [], 'no screenshot asked while the desktop is down');
  fake.desktopOf(id).up = true;
  await page.getByRole('img', { name: 'Screen of thumb' }).waitFor();
  t.equal(shots.length, 1, 'one screenshot, once machine.ready came');
  t.match(shots[0], /\/screenshot\?format=jpeg&quality=50&max_side=320$/);

  // Sign out while the next thumbnail is in flight (held here until the sign-out is done).
  const held = new Promise<Route>((resolve) => void page.route(/\/screenshot\?/, (route) => resolve(route)));
  const route = await held;
  const inFlight = route.request();
  const settled = new Promise<string>((resolve) => {
    page.on('requestfailed', (r) => r === inFlight && resolve('aborted'));
    page.on('requestfinished', (r) => r === inFlight && resolve('answered'));
  });
  const after: string[] = [];
  page.on('request', (r) => {
    if (/\/v1\//.test(r.url()) && !/\/v1\/auth\//.test(r.url())) after.push(`${r.method()} ${r.url()}`);
  });
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(`${URL0}/signin`);
  // Let it go on now: an answer (401, the cookie is gone) would reach the console; an aborted one never leaves.
  await route.continue().catch(() => {});
  t.equal(await settled, 'aborted', 'the thumbnail in flight was aborted at sign-out');
  t.same(after, [], 'no request of the signed-in page went out after sign-out');
  await context.close();
});

t.test('a quota refusal shows its quota, a negotiated maximum as negotiated', async (t) => {
  const ten = await rig.tenant('developer');
  for (let i = 0; i < 3; i++) t.equal((await rig.call('POST', '/v1/machines', { key: ten.key, body: { name: `q${i}` } })).status, 201);
  const { context, page } = await signedIn(ten.cookie);
  await page.goto(`${URL0}/`);
  const form = page.getByRole('form', { name: 'Create a machine' });
  await page.getByRole('link', { name: 'q2', exact: true }).waitFor();
  await form.getByRole('button', { name: 'Create machine' }).click();
  t.equal(await form.getByRole('alert').textContent(), 'Quota exceeded — running machines on plan developer: 3 used, maximum 3.');

  // An enterprise agreement's null maximum is negotiated, never unlimited (this answer is the page's own route).
  await page.route(`${URL0}/v1/machines`, (route) => route.request().method() !== 'POST' ? route.continue() : route.fulfill({
    status: 402,
    contentType: 'application/json',
    body: JSON.stringify({ error: { code: 'quota_exceeded', message: 'The plan allows a negotiated number of machines; 7 in use.', request_id: 'req_x', details: [],
      quota: { limit: 'machines', current: 7, maximum: null, plan_id: 'enterprise', upgrade_url: 'https://example.com/contact' } } }),
  }));
  await form.getByRole('button', { name: 'Create machine' }).click();
  await form.getByRole('alert').filter({ hasText: 'negotiated' }).waitFor();
  t.equal(await form.getByRole('alert').textContent(), 'Quota exceeded — machines on plan enterprise: 7 used, maximum negotiated. Upgrade: https://example.com/contact');
  await context.close();
  // The two refusals are the only console errors this test makes.
  const quotaErrors = b.errors.filter((e) => /status of 402/.test(e) && /\/v1\/machines\)$/.test(e));
  t.equal(quotaErrors.length, 2, 'the two 402 answers reached the console');
  b.errors.splice(0, b.errors.length, ...b.errors.filter((e) => !quotaErrors.includes(e)));
});

t.test('no console errors', async (t) => {
  t.same(b.errors, []);
});

/**
 * The dashboard end to end in the system Chromium against the control plane on the container substrate
 * (real guest image, agent, desktop): sign up → trial checkout → create a machine → the canvas shows the
 * desktop (it matches the server's screenshot) → take control → click into a page in the remote desktop
 * and type → the text appears on the canvas (pixel check) and on the machine's own screenshot → a second
 * browser forcing control makes the first show "control lost" and who holds it → terminal tab runs echo
 * → upload then download a file → create a snapshot → delete the machine. No console errors.
 * DASHBOARD_SCREENSHOTS=1 also writes the pages' screenshots into docs/dashboard/.
 * Needs root, podman and runc; the image is built on first use (minutes), then cached.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import t from 'tap';
import type { Page } from 'playwright-core';
import { builtDashboard, dashboardBrowser, overflowsX, unnamedControls } from '../helpers/dashboard.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const URL0 = 'http://cp.test';
const SHOTS = process.env.DASHBOARD_SCREENSHOTS === '1' ? path.resolve('docs/dashboard') : null;
const PASSWORD = 'correct horse battery';

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

/** The canvas scaled down to w×h RGB bytes (drawn in the page, read back). */
async function canvasPixels(page: Page, w = 64, h = 40): Promise<number[]> {
  return page.evaluate<number[]>(`(() => {
    const src = document.querySelector('canvas[aria-label^="Screen of"]');
    const c = document.createElement('canvas');
    c.width = ${w}; c.height = ${h};
    const g = c.getContext('2d');
    g.drawImage(src, 0, 0, ${w}, ${h});
    const d = g.getImageData(0, 0, ${w}, ${h}).data;
    const out = [];
    for (let i = 0; i < d.length; i += 4) out.push(d[i], d[i + 1], d[i + 2]);
    return out;
  })()`);
}

/** Pixels of the full-size canvas darker than `below` (all channels), in the rectangle given. */
async function darkPixels(page: Page, rect: { x: number; y: number; w: number; h: number }, below = 100): Promise<number> {
  return page.evaluate<number>(`(() => {
    const c = document.querySelector('canvas[aria-label^="Screen of"]');
    const d = c.getContext('2d').getImageData(${rect.x}, ${rect.y}, ${rect.w}, ${rect.h}).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < ${below} && d[i + 1] < ${below} && d[i + 2] < ${below}) n++;
    return n;
  })()`);
}

function meanDiff(a: number[], b: number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += Math.abs(a[i]! - b[i]!);
  return s / a.length;
}

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 120_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

t.test('the dashboard end to end on the container substrate', { timeout: 1_200_000 }, async (t) => {
  const dashboardDir = await builtDashboard();
  const { rig, created } = await containerMachinesRig(t, '/tmp/cpd-', {}, { dashboardDir });
  const served = await serveWithGateway(rig);
  t.teardown(() => served.close());
  const b = await dashboardBrowser(t, served.port);
  const { context: ctxA, page } = await b.page({ width: 1280, height: 900 });
  page.setDefaultTimeout(120_000);
  page.on('dialog', (d) => void d.accept());

  // --- sign up, trial checkout -------------------------------------------------------------------
  await page.goto(`${URL0}/signup`);
  await shot(page, 'signup');
  const email = `e2e-${Date.now()}@example.com`;
  await page.getByLabel('Name').fill('Ada');
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel(/^Password/).fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.waitForURL(`${URL0}/billing`);
  await page.getByRole('button', { name: 'Start 14-day trial of Pro' }).click();
  await page.locator('[data-billing-state="trialing"]').waitFor();
  t.pass('the trial checkout completed through the built-in provider');

  // --- create a machine ---------------------------------------------------------------------------
  await page.getByRole('link', { name: 'Machines' }).click();
  await page.getByLabel('Name').fill('desk');
  await page.getByRole('button', { name: 'Create machine' }).click();
  const link = page.getByRole('link', { name: 'desk', exact: true });
  await link.waitFor();
  const id = /\/machines\/(mch_[a-z0-9]+)/.exec((await link.getAttribute('href'))!)![1]!;
  created.push(id);
  await page.locator('[data-state="running"]').first().waitFor();
  await link.click();
  await page.waitForURL(`${URL0}/machines/${id}`);
  await page.locator('[data-conn="live"]').waitFor({ timeout: 180_000 });
  t.pass('the screen channel is live');

  // The test's own API key (from the browser's session cookie) opens a white page with a text area in
  // the machine's browser, so the canvas has something to match and the typing somewhere to land.
  const cookie = (await ctxA.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
  const key = (await rig.call('POST', '/v1/api-keys', { cookie, body: { name: 'e2e', scopes: ['machines:read', 'machines:write', 'machines:control', 'sessions:write'] } })).json.secret as string;
  const base = `/v1/machines/${id}`;
  const s0 = (await rig.call('POST', '/v1/sessions', { key, body: { machine_id: id, type: 'agent' } })).json.id;
  t.equal((await rig.call('POST', `${base}/input-lease`, { key, body: { session_id: s0 } })).status, 200);
  const html = '<body style="margin:0;background:#fff"><textarea style="width:100vw;height:100vh;border:0;font:64px monospace;color:#000;background:#fff"></textarea></body>';
  const opened = await rig.call('POST', `${base}/browser/open`, { key, headers: { 'x-session-id': s0 }, body: { url: `data:text/html,${encodeURIComponent(html)}` } });
  t.equal(opened.status, 200, `the browser opened in the machine ${opened.status === 200 ? '' : opened.text}`);
  t.equal((await rig.call('DELETE', `/v1/sessions/${s0}`, { key })).status, 204);

  // --- the canvas shows the desktop --------------------------------------------------------------
  const pngOf = async () => Buffer.from((await rig.call('GET', `${base}/screenshot?format=png`, { key })).json.image as string, 'base64');
  const serverPixels = async () => [...(await sharp(await pngOf()).removeAlpha().resize(64, 40, { fit: 'fill' }).raw().toBuffer())];
  // Wait until the browser window covers most of the screen (white), on the canvas.
  await until('the white page on the canvas', async () => {
    const px = await canvasPixels(page);
    const white = px.filter((v) => v > 200).length / px.length;
    return white > 0.5;
  });
  // The screenshot and the last frame are taken at different moments: compare until both have settled.
  const { diff } = await until('the canvas to match the screenshot', async () => {
    const d = meanDiff(await canvasPixels(page), await serverPixels());
    return d < 25 ? { diff: d } : null;
  }, 30_000);
  t.ok(diff < 25, `the canvas matches the machine's screenshot (mean difference ${diff.toFixed(1)} of 255)`);
  t.equal(await page.locator('[data-control]').getAttribute('data-control'), 'view', 'view-only by default');

  // --- take control, type into the remote desktop ------------------------------------------------
  await page.getByRole('button', { name: 'Take control' }).click();
  await page.locator('[data-control="control"]').waitFor();
  await shot(page, 'machine-screen');
  const canvas = page.getByRole('img', { name: 'Screen of desk' });
  const box = (await canvas.boundingBox())!;
  // The canvas is scaled to fit (letterboxed): a pointer over remote (300, 500) must land there.
  const scale = Math.min(box.width / 1280, box.height / 800);
  const ox = box.x + (box.width - 1280 * scale) / 2;
  const oy = box.y + (box.height - 800 * scale) / 2;
  t.ok(ox - box.x > 10 || oy - box.y > 10, 'the 1280x800 desktop is letterboxed in this viewport');
  await page.mouse.move(ox + 300 * scale, oy + 500 * scale);
  const pointer = await until('the remote pointer to move', async () => {
    // The spec has no read-only pointer query: ask the machine's own X server, as a person in its shell would.
    const r = await rig.call('POST', `${base}/exec`, { key, body: { command: ['xdotool', 'getmouselocation', '--shell'] } });
    const p = { x: Number(/^X=(\d+)$/m.exec(r.json?.stdout ?? '')?.[1]), y: Number(/^Y=(\d+)$/m.exec(r.json?.stdout ?? '')?.[1]) };
    return Math.abs(p.x - 300) <= 1 && Math.abs(p.y - 500) <= 1 ? p : null;
  }, 30_000);
  t.ok(pointer, 'the pointer lands where the canvas was pointed at');
  // Click in the middle of the remote page (the text area), then type with the real keyboard.
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  await new Promise((r) => setTimeout(r, 1000));
  const region = { x: 0, y: 60, w: 1280, h: 400 };
  const before = await darkPixels(page, region);
  await page.keyboard.type('typed via dashboard');
  const after = await until('the typed text on the canvas', async () => {
    const n = await darkPixels(page, region);
    return n > before + 2000 ? n : null;
  });
  t.ok(after > before + 2000, `the typed text appears on the canvas (${before} → ${after} dark pixels)`);
  const serverDark = (await sharp(await pngOf()).removeAlpha().extract({ left: 0, top: 60, width: 1280, height: 400 }).raw().toBuffer());
  let nDark = 0;
  for (let i = 0; i < serverDark.length; i += 3) if (serverDark[i]! < 100 && serverDark[i + 1]! < 100 && serverDark[i + 2]! < 100) nDark++;
  t.ok(nDark > before + 2000, `and on the machine's own screenshot (${nDark} dark pixels)`);
  await shot(page, 'machine-control');

  // --- a second browser forces control: the first shows "control lost" ----------------------------
  const { context: ctxB, page: pageB } = await b.page({ width: 1280, height: 900 });
  pageB.setDefaultTimeout(120_000);
  await pageB.goto(`${URL0}/signin`);
  await pageB.getByLabel('E-mail').fill(email);
  await pageB.getByLabel('Password').fill(PASSWORD);
  await pageB.getByRole('button', { name: 'Sign in' }).click();
  await pageB.getByRole('heading', { name: 'Machines' }).waitFor();
  await pageB.goto(`${URL0}/machines/${id}`);
  await pageB.locator('[data-conn="live"]').waitFor();
  await pageB.getByRole('button', { name: 'Take control' }).click();
  await pageB.locator('[data-control="control"]').waitFor();
  await page.locator('[data-control="lost"]').waitFor();
  const lostText = await page.locator('[data-control="lost"]').textContent();
  t.match(lostText, /^Control lost: held by a human session \(ses_[a-z0-9]+\) opened by a person usr_/, 'the first browser shows control lost and the holder');
  await shot(page, 'machine-control-lost');
  await pageB.getByRole('button', { name: 'Release' }).click();
  await pageB.locator('[data-control="view"]').waitFor();
  await ctxB.close();

  // --- terminal tab ------------------------------------------------------------------------------
  await page.getByRole('link', { name: 'Terminal' }).click();
  await page.getByRole('status', { name: 'Terminal connection' }).filter({ hasText: 'connected' }).waitFor();
  await page.locator('.xterm').click();
  await page.keyboard.type('echo dash-$((6*7))\n');
  await page.locator('.xterm-rows').filter({ hasText: 'dash-42' }).waitFor();
  t.pass('the terminal tab ran echo');
  // A narrower window resizes the pty (fit addon → resize message on the terminal channel).
  const termCols = async () => ((await rig.call('GET', `${base}/terminals`, { key })).json.terminals as Array<{ cols: number; attached: boolean }>).find((x) => x.attached)?.cols ?? 0;
  const wide = await until('the attached terminal', termCols, 30_000);
  await page.setViewportSize({ width: 700, height: 900 });
  const narrow = await until('the pty to be resized', async () => { const c = await termCols(); return c > 0 && c < wide ? c : null; }, 30_000);
  t.ok(narrow < wide, `the pty follows the window (${wide} → ${narrow} columns)`);
  await page.setViewportSize({ width: 1280, height: 900 });
  await shot(page, 'machine-terminal');

  // --- files: upload then download -------------------------------------------------------------
  await page.getByRole('link', { name: 'Files' }).click();
  const content = `uploaded from the dashboard ${'x'.repeat(3000)}\n`;
  await page.getByLabel('Upload a file').setInputFiles({ name: 'up.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
  await page.getByRole('status', { name: 'Transfer' }).filter({ hasText: 'Uploaded up.txt' }).waitFor();
  const read = await rig.call('GET', `${base}/files/content?path=/home/agent/up.txt`, { key });
  t.equal(read.json?.content, content, 'the uploaded file is in the machine');
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download up.txt' }).click()]);
  const chunks: Buffer[] = [];
  for await (const c of (await download.createReadStream())) chunks.push(c as Buffer);
  t.equal(Buffer.concat(chunks).toString(), content, 'and downloads back byte for byte');
  t.equal(download.suggestedFilename(), 'up.txt');
  await shot(page, 'machine-files');

  // --- snapshots ---------------------------------------------------------------------------------
  await page.getByRole('link', { name: 'Snapshots' }).click();
  await page.getByLabel('Snapshot name').fill('first');
  await page.getByRole('button', { name: 'Create snapshot' }).click();
  await page.locator('.snapshots li', { hasText: 'first' }).locator('[data-state="ready"]').waitFor({ timeout: 300_000 });
  t.pass('a snapshot was created');
  await page.getByRole('button', { name: 'Restore first' }).click();
  await page.locator('.snapshots li', { hasText: 'Before restore' }).locator('[data-state="ready"]').waitFor({ timeout: 300_000 });
  await until('the machine to run again', async () => (await rig.call('GET', base, { key })).json?.state === 'running', 180_000);
  t.pass('restored (the previous disk kept as "Before restore")');
  await shot(page, 'machine-snapshots');

  // --- connection state through a stop and a start ------------------------------------------------
  await page.getByRole('link', { name: 'Screen' }).click();
  await page.locator('[data-conn="live"]').waitFor();
  await page.getByRole('button', { name: 'Stop desk' }).click();
  await page.locator('[data-conn="machine stopped"]').waitFor();
  t.pass('the screen says the machine is stopped');
  await page.getByRole('button', { name: 'Start desk', exact: true }).click();
  await page.locator('[data-conn="live"]').waitFor({ timeout: 180_000 });
  t.pass('and comes back live by itself after a start');

  // --- ports, secrets, settings -----------------------------------------------------------------
  await page.getByRole('link', { name: 'Ports' }).click();
  await page.getByLabel('Port', { exact: true }).fill('8000');
  await page.getByLabel('Label').fill('web');
  await page.getByRole('button', { name: 'Publish port' }).click();
  const accessLink = await page.getByRole('region', { name: 'New preview link' }).locator('code').textContent();
  t.match(accessLink, /^http:\/\/prv-[a-z0-9]+\.localhost(:\d+)?\/__computer\/access\?token=/, 'the access link is shown once');
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByRole('button', { name: 'Copy URL of port 8000' }).waitFor();
  t.notMatch(await page.content(), /token=/, 'and not kept on the page');
  await shot(page, 'machine-ports');

  await page.getByRole('link', { name: 'Secrets' }).click();
  await page.getByLabel('Secret name').fill('API_TOKEN');
  await page.getByLabel('Value').fill('s3cret-value-never-shown');
  await page.getByRole('button', { name: 'Set secret' }).click();
  await page.getByRole('button', { name: 'Revoke API_TOKEN' }).waitFor();
  t.equal(await page.getByLabel('Value').inputValue(), '', 'the value leaves the form once stored');
  t.notMatch(await page.content(), /s3cret-value-never-shown/, 'the value is nowhere on the page');
  await shot(page, 'machine-secrets');
  await page.getByRole('button', { name: 'Revoke API_TOKEN' }).click();
  await page.getByRole('button', { name: 'Revoke API_TOKEN' }).waitFor({ state: 'detached' });

  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('button', { name: 'Add metadata' }).click();
  await page.getByLabel('Key').fill('team');
  await page.getByLabel('Value').fill('qa');
  await page.getByRole('button', { name: 'Save metadata' }).click();
  await page.getByRole('status').filter({ hasText: 'Metadata saved' }).waitFor();
  await page.getByLabel('Machine name').fill('desk2');
  await page.getByRole('button', { name: 'Rename' }).click();
  await page.getByRole('heading', { name: 'desk2' }).waitFor();
  t.match((await rig.call('GET', base, { key })).json, { name: 'desk2', metadata: { team: 'qa' } }, 'renamed, metadata saved');

  await page.getByRole('link', { name: 'Events' }).click();
  await page.getByRole('list', { name: 'Events' }).getByText('machine.restore_completed').first().waitFor();
  await shot(page, 'machine-events');

  await page.getByRole('link', { name: 'Organization' }).click();
  await page.getByRole('cell', { name: 'e2e', exact: true }).waitFor();
  await shot(page, 'organization');
  await page.getByRole('link', { name: 'Billing' }).click();
  await page.getByRole('table', { name: 'Usage summary' }).waitFor();
  await shot(page, 'billing');

  // Every tab of the machine page at 1280 and 390 px: no horizontal overflow, every control named.
  for (const width of [1280, 390]) {
    const { context, page: p } = await b.page({ width, height: 800 });
    await context.addCookies(await ctxA.cookies());
    for (const tab of ['screen', 'terminal', 'files', 'snapshots', 'ports', 'secrets', 'events', 'settings']) {
      await p.goto(`${URL0}/machines/${id}/${tab}`);
      await p.getByRole('heading', { name: 'desk2' }).waitFor();
      await p.waitForLoadState('networkidle').catch(() => {});
      if (tab === 'screen') await p.locator('[data-conn="live"]').waitFor();
      if (tab === 'terminal') await p.locator('.xterm-rows').waitFor();
      t.equal(await overflowsX(p), false, `${tab} at ${width} px: no horizontal overflow`);
      t.same(await unnamedControls(p), [], `${tab} at ${width} px: every control named`);
    }
    await context.close();
  }

  await page.getByRole('link', { name: 'Machines' }).click();
  await page.getByRole('img', { name: 'Screen of desk2' }).waitFor();
  t.pass('the machines list shows a live thumbnail');
  await shot(page, 'machines');

  // --- delete the machine ------------------------------------------------------------------------
  await page.goto(`${URL0}/machines/${id}`);
  await page.getByRole('button', { name: 'Delete desk2' }).click();
  await page.waitForURL(`${URL0}/`);
  await until('the machine to be gone', async () => (await rig.call('GET', base, { key })).status === 404, 180_000);
  t.pass('the machine was deleted');

  t.same(b.errors, [], 'no console errors');
  await ctxA.close();
});

/**
 * Issue 21 item 1: the README from a fresh clone. This repository's HEAD cloned into a new 0700 directory (a
 * checkout under /root or a `mktemp -d`), `npm start` with the default DATA_DIR (./data, which it makes 0700),
 * then the walkthrough's steps 1-5 with fetch as the README does them with curl: sign up, check out, make a key,
 * create a machine, wait for /display, take a PNG screenshot. Before the fix the create answered
 * `503 compute_unavailable "The machine failed to start."` (runc, as guest root, could not pass ./data).
 * Reuses the cached guest image; `npm start` still builds the TypeScript and the dashboard (a minute or two).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { freshClone } from '../helpers/fresh-clone.js';

t.setTimeout(1_200_000);

const DISPLAY_TRIES = 300;

t.test("the README's walkthrough from a fresh clone under a 0700 directory", { timeout: 1_200_000 }, async (t) => {
  const clone = await freshClone(t);
  const BASE = clone.base;
  t.equal(fs.statSync(path.dirname(clone.dir)).mode & 0o777, 0o700, 'the checkout is under a 0700 directory');
  t.equal(fs.statSync(path.join(clone.dir, 'data')).mode & 0o777, 0o700, 'npm start made ./data 0700');

  // 1. Sign up (the cookie jar: the session cookie).
  const signup = await fetch(`${BASE}/v1/auth/signup`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'me@example.com', password: 'a long password' }),
  });
  t.equal(signup.status, 201, 'signed up');
  const cookie = /computer_session=[^;]+/.exec(signup.headers.get('set-cookie') ?? '')![0];
  const withCookie = { 'content-type': 'application/json', origin: BASE, cookie };

  // 2. Checkout, and opening its link starts the trial.
  const checkout = await fetch(`${BASE}/v1/billing/checkout`, {
    method: 'POST', headers: withCookie, body: JSON.stringify({ plan_id: 'developer', success_url: `${BASE}/` }),
  });
  t.equal(checkout.status, 200, 'checkout link');
  const url = ((await checkout.json()) as { url: string }).url;
  t.equal((await fetch(url, { redirect: 'manual' })).status, 303, 'trialing');

  // 3. An API key.
  const keyRes = await fetch(`${BASE}/v1/api-keys`, {
    method: 'POST', headers: withCookie,
    body: JSON.stringify({ name: 'cli', scopes: ['machines:read', 'machines:write', 'machines:control', 'sessions:write'] }),
  });
  t.equal(keyRes.status, 201, 'key made');
  const KEY = ((await keyRes.json()) as { secret: string }).secret;
  const api = (p: string, init: RequestInit = {}) =>
    fetch(`${BASE}${p}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' } });

  // 4. A machine: the answer comes once it is running.
  const create = await api('/v1/machines', { method: 'POST', body: JSON.stringify({ name: 'first' }) });
  const machine = (await create.json()) as { id: string; state: string };
  t.equal(create.status, 201, `the machine started: ${JSON.stringify(machine)}`);
  if (create.status !== 201) return;
  t.equal(machine.state, 'running');
  t.teardown(async () => {
    await api(`/v1/machines/${machine.id}`, { method: 'DELETE' }).catch(() => {});
  });

  // 5. Wait for the desktop (503 until it is up), then a screenshot.
  let display = 0;
  for (let i = 0; i < DISPLAY_TRIES && display !== 200; i++) {
    display = (await api(`/v1/machines/${machine.id}/display`)).status;
    if (display !== 503) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  t.equal(display, 200, 'the desktop answers');
  const shot = await api(`/v1/machines/${machine.id}/screenshot?format=png`);
  t.equal(shot.status, 200, 'screenshot');
  const png = Buffer.from(((await shot.json()) as { image: string }).image, 'base64');
  t.same([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');

  t.notMatch(clone.output(), /substrate unavailable/, 'npm start reported no substrate problem');
});

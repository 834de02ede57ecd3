/** The real server (main.ts's serve) on 127.0.0.1, port 0: signup and login over HTTP, cookie flags. */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../control-plane/src/config.js';
import type { LogLine } from '../../control-plane/src/log.js';
import { serve } from '../../control-plane/src/main.js';
import { FAST_SCRYPT } from '../helpers/control-plane.js';

t.test('serve: signup, login, cookie flags, request id, per-socket IP', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-serve-'));
  const logs: LogLine[] = [];
  const config = parseConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: path.join(dir, 'data'), PUBLIC_BASE_URL: 'https://computer.example' });
  const said: string[] = [];
  const running = await serve(config, { log: (l) => logs.push(l), services: { passwordCost: FAST_SCRYPT }, say: (l) => said.push(l) });
  t.teardown(async () => {
    await running.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  t.ok(running.port > 0);
  t.ok(fs.existsSync(path.join(dir, 'data', 'control-plane.sqlite')));
  // SECRETS_KEYRING unset: the first run creates the keyring in DATA_DIR, 0600, and says so.
  const keyring = path.join(dir, 'data', 'secrets-keyring.json');
  t.equal(fs.statSync(keyring).mode & 0o777, 0o600, 'keyring created 0600');
  t.ok(said.some((l) => l.includes(`created the keyring ${keyring} (mode 0600)`)), 'and the operator is told');

  const body = JSON.stringify({ email: 'http@example.com', password: 'a long enough password' });
  const s = await fetch(`${running.url}/v1/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  t.equal(s.status, 201);
  const sc = s.headers.get('set-cookie')!;
  t.match(sc, /^__Host-computer_session=[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=1209600; Secure$/);
  t.match(s.headers.get('x-request-id'), /^req_/);

  const l = await fetch(`${running.url}/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  t.equal(l.status, 200);
  const cookie = l.headers.get('set-cookie')!.split(';')[0]!;
  t.match(l.headers.get('set-cookie'), /HttpOnly; SameSite=Lax; Max-Age=1209600; Secure/);

  const me = await fetch(`${running.url}/v1/auth/me`, { headers: { cookie } });
  t.equal(me.status, 200);
  t.equal(((await me.json()) as any).user.email, 'http@example.com');

  const csrf = await fetch(`${running.url}/v1/api-keys`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'k', scopes: [] }) });
  t.equal(csrf.status, 403);
  const ok = await fetch(`${running.url}/v1/api-keys`, {
    method: 'POST',
    headers: { cookie, origin: 'https://computer.example', 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'k', scopes: [] }),
  });
  // Past the Origin check to the service, which refuses: a new (unsubscribed) organization creates nothing.
  t.equal(ok.status, 402);
  t.match(await ok.json(), { error: { code: 'quota_exceeded', quota: { limit: 'subscription' } } });

  const nf = await fetch(`${running.url}/nowhere`);
  t.equal(nf.status, 404);
  t.equal(((await nf.json()) as any).error.request_id, nf.headers.get('x-request-id'));

  // The per-IP limit keys on the socket address; over real HTTP that is 127.0.0.1 for every request here.
  for (let i = 0; i < 9; i++) {
    await fetch(`${running.url}/v1/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: `n${i}@example.com`, password: 'a long enough password' }) });
  }
  const limited = await fetch(`${running.url}/v1/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'last@example.com', password: 'a long enough password' }) });
  t.equal(limited.status, 429);
  t.ok(Number(limited.headers.get('retry-after')) > 0);
  t.ok(logs.some((x) => x.event === 'request' && x.operation === 'auth.signup' && x.status === 201));
});

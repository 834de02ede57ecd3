/**
 * Cookie tossing from a preview into the API, performed in Chromium (playwright-core, the system
 * Chromium). The layout docs/api-ports.md warns against: the API on computer.example.test and previews on
 * *.preview.example.test, both mapped onto the test server's loopback port (https through a TLS
 * terminator with a throwaway certificate). An attacker's public preview runs script that sets
 * `computer_session=<attacker's session>; domain=example.test; path=/v1` (and tries the `__Host-` name) and
 * `computer_preview=junk; domain=preview.example.test`. Then the victim's browser asks the API who it is,
 * and opens a private preview through its access link.
 *
 * Under https the session cookie is `__Host-computer_session`, which no sibling can set: the API still
 * sees the victim. Under plain http the tossed cookie arrives beside the victim's: the API refuses the
 * request (401, naming the two cookies) instead of acting as the attacker. The private preview opens
 * although the tossed junk preview cookie is sent first.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../helpers/dashboard.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';
import { tlsTerminator } from '../helpers/tls-terminator.js';

const API = 'computer.example.test';
const PREVIEWS = 'preview.example.test';
const PREVIEW_SCOPES = ['machines:read', 'machines:write', 'machines:control', 'ports:write'];

/** The app behind every preview here: `/` runs whatever script the test puts in `page.script`; anything else says hello. */
async function guestApp(page: { script: string }): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.url === '/toss') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end(`<!doctype html><title>toss</title><script>${page.script}; window.done = true;</script>`);
    }
    res.end('hello from the private app');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise<void>((r) => { server.close(() => r()); server.closeAllConnections(); }),
  };
}

for (const scheme of ['https', 'http'] as const) {
  t.test(`cookie tossing from a sibling preview, ${scheme}`, { timeout: 180_000 }, async (t) => {
    const fake = fakeSubstrateWithAgents();
    // rig.call's cookie writes come from http://cp.test, the rigs' usual origin.
    const rig = await makeMachinesRig({ substrate: fake.substrate, env: { PUBLIC_BASE_URL: `${scheme}://${API}`, PREVIEW_DOMAIN: PREVIEWS, ALLOWED_ORIGINS: 'http://cp.test' } });
    const served = await serveWithGateway(rig);
    const page = { script: '' };
    const app = await guestApp(page);
    const tls = scheme === 'https' ? await tlsTerminator(served.port, [API, `*.${PREVIEWS}`]) : null;
    const front = tls?.port ?? served.port;
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP *.example.test:${scheme === 'https' ? 443 : 80} 127.0.0.1:${front}`],
    });
    t.teardown(async () => {
      await browser.close();
      await tls?.close();
      await app.close();
      await served.close();
      fake.close();
      await rig.close();
    });
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const tab = await context.newPage();
    const apiBase = `${scheme}://${API}`;

    // The attacker: an organization with a machine and a public preview of the app, and a session of its own.
    const attacker = await rig.tenant('developer', PREVIEW_SCOPES);
    const attackerSession = attacker.cookie.slice(attacker.cookie.indexOf('=') + 1);
    const am = (await rig.call('POST', '/v1/machines', { key: attacker.key, body: {} })).json;
    const pub = (await rig.call('POST', `/v1/machines/${am.id}/ports`, { key: attacker.key, body: { port: app.port, access: 'public' } })).json;
    t.equal(pub.url, `${scheme}://prv-${pub.id.slice(4)}.${PREVIEWS}/`);

    // The victim signs up in the browser: the API's own Set-Cookie.
    await tab.goto(`${apiBase}/v1/auth/me`);
    const signup = await tab.evaluate<{ status: number; body: any }>(`fetch('/v1/auth/signup', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'victim@example.com', password: 'correct horse battery', name: 'v' }) }).then(async (r) => ({ status: r.status, body: await r.json() }))`);
    t.equal(signup.status, 201);
    const victimId: string = signup.body.user_id;
    const own = await context.cookies(apiBase);
    t.same(own.map((c) => c.name), [scheme === 'https' ? '__Host-computer_session' : 'computer_session'], 'the API set its session cookie');
    const me = () => tab.evaluate<{ status: number; body: any }>(`fetch('/v1/auth/me').then(async (r) => ({ status: r.status, body: await r.json() }))`);
    t.equal((await me()).body.user.id, victimId, 'signed in as the victim');

    // A visitor of a private preview (another tenant's link) — the sibling preview will try to lock them out.
    const owner = await rig.tenant('developer', PREVIEW_SCOPES);
    const om = (await rig.call('POST', '/v1/machines', { key: owner.key, body: {} })).json;
    const priv = (await rig.call('POST', `/v1/machines/${om.id}/ports`, { key: owner.key, body: { port: app.port } })).json;

    // The attack: the victim visits the attacker's public preview.
    page.script = [
      `document.cookie = 'computer_session=${attackerSession}; domain=example.test; path=/v1'`,
      `document.cookie = '__Host-computer_session=${attackerSession}; domain=example.test; path=/'`,
      `document.cookie = 'computer_preview=${'j'.repeat(43)}; domain=${PREVIEWS}; path=/'`,
    ].join(';\n');
    await tab.goto(`${pub.url}toss`);
    t.equal(await tab.evaluate('window.done'), true, "the attacker's page ran");
    const atApi = await context.cookies(`${apiBase}/v1/auth/me`);
    t.ok(atApi.some((c) => c.name === 'computer_session' && c.value === attackerSession && c.domain === '.example.test'), 'the tossed session cookie reaches the API');
    t.notOk(atApi.some((c) => c.name === '__Host-computer_session' && c.value === attackerSession), 'the browser refuses a __Host- cookie with a Domain');

    await tab.goto(`${apiBase}/v1/auth/me`);
    const after = await me();
    if (scheme === 'https') {
      t.equal(after.status, 200);
      t.equal(after.body.user.id, victimId, 'the API still sees the victim: only the __Host- cookie is a session');
    } else {
      t.equal(after.status, 401, 'two session cookies: refused, not the attacker');
      t.equal(after.body.error.code, 'unauthenticated');
      t.match(after.body.error.message, /more than one session cookie/);
      t.not(after.body.user?.id, attacker.userId);
    }

    // The private preview opens through its access link although the junk cookie is older (sent first).
    const res = await tab.goto(priv.access_url);
    t.equal(res?.status(), 200, 'the preview opens');
    t.equal(await tab.evaluate('document.body.innerText'), 'hello from the private app');
    const sent = (await context.cookies(priv.url)).filter((c) => c.name === 'computer_preview');
    t.equal(sent.length, 2, "the request carried both the junk and the preview's own cookie");
  });
}

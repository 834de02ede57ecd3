import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Hono } from 'hono';
import { createAgentApp, type AgentEnv } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { listenUnix } from '../../agent/src/channel/unix-socket.js';
import type { LogLine } from '../../agent/src/http/log.js';
import { H2Client } from '../helpers/h2-client.js';
import { AppError } from '../../shared/errors.js';
import { enrolledWith } from '../helpers/agent-enrollment.js';

const TOKEN = 'tok_' + 'x'.repeat(40);

t.test('auth, envelope, request id, logging over the real channel', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-app-'));
  const sock = path.join(dir, 'agent.sock');
  const lines: LogLine[] = [];
  const mount = new Hono<AgentEnv>();
  mount.get('/echo/:id', (c) => c.json({ ok: true, id: c.req.param('id') }));
  mount.get('/boom', () => {
    throw new Error('secret-path /etc/should-not-log');
  });
  mount.get('/refuse', () => {
    throw new AppError('conflict', 'nope');
  });
  const app = createAgentApp({ enrollment: enrolledWith(TOKEN), log: (l) => lines.push(l), mounts: [mount] });
  const server = createAgentServer(app, (l) => lines.push(l));
  const listener = await listenUnix(server, sock);
  t.teardown(() => {
    listener.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  t.equal(fs.statSync(sock).mode & 0o777, 0o600, 'socket is 0600');

  const good = new H2Client(sock, TOKEN);
  const none = new H2Client(sock, null);
  const bad = new H2Client(sock, TOKEN + 'x');
  t.teardown(() => Promise.all([good.close(), none.close(), bad.close()]));

  const ok = await good.request('GET', '/echo/abc?q=hidden-query');
  t.equal(ok.status, 200);
  t.same(ok.json(), { ok: true, id: 'abc' });
  t.match(ok.headers['x-request-id'], /^req_/);

  for (const c of [none, bad]) {
    const r = await c.request('GET', '/echo/abc');
    t.equal(r.status, 401);
    const e = r.json().error;
    t.equal(e.code, 'unauthenticated');
    t.type(e.message, 'string');
    t.type(e.request_id, 'string');
    t.same(e.details, []);
    t.equal(e.quota, null);
  }

  const nf = await good.request('GET', '/nope', undefined, { 'x-request-id': 'req_given' });
  t.equal(nf.status, 404);
  t.equal(nf.json().error.code, 'not_found');
  t.equal(nf.json().error.request_id, 'req_given');

  const boom = await good.request('GET', '/boom');
  t.equal(boom.status, 500);
  t.equal(boom.json().error.code, 'internal_error');
  t.notMatch(boom.body.toString(), /should-not-log/);

  const conflict = await good.request('GET', '/refuse');
  t.equal(conflict.status, 409);

  await new Promise((r) => setTimeout(r, 50));
  const reqLines = lines.filter((l) => l.event === 'request');
  t.ok(reqLines.length >= 6);
  t.ok(reqLines.some((l) => l.route === '/echo/:id' && l.status === 200 && (l.bytes as number) > 0));
  const all = JSON.stringify(lines);
  for (const s of ['abc', 'hidden-query', 'should-not-log', TOKEN]) t.notOk(all.includes(s), `log never shows ${s}`);
});

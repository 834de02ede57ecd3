/**
 * The whole agent as main.ts wires it (startAgent): every route group live on one real channel, the
 * token file and channel denied through the files API, and nothing sensitive in the log.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startAgent } from '../../agent/src/agent.js';
import { decodeToRgb } from '../../agent/src/desktop/screen.js';
import { parseAgentArgs } from '../../agent/src/config.js';
import type { LogLine } from '../../agent/src/http/log.js';
import { dropEnrollmentSecret, ENROLL_FILE_NAME } from '../../control-plane/src/substrate/substrate.js';
import { H2Client } from '../helpers/h2-client.js';
import { startXvfb } from '../helpers/xvfb.js';

t.test('startAgent serves every route group over the unix socket', async (t) => {
  const xvfb = await startXvfb();
  t.teardown(() => xvfb.stop());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-whole-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const chanDir = path.join(dir, 'chan');
  fs.mkdirSync(chanDir, { mode: 0o700 });
  const enrollFile = path.join(chanDir, ENROLL_FILE_NAME);
  const TOKEN = 'whole-agent-token-' + 'z'.repeat(30);
  const sock = path.join(chanDir, 'agent.sock');

  const parsed = parseAgentArgs([
    '--socket', sock, '--enroll-file', enrollFile, '--display', xvfb.display, '--fbdir', xvfb.fbdir,
    '--secrets-dir', path.join(dir, 'secrets'), '--profile-script', path.join(dir, 'profile.sh'),
    '--browser-sandbox', 'off',
  ]);
  if (parsed.help) throw new Error('unexpected help');
  const lines: LogLine[] = [];
  const agent = await startAgent(parsed.config, (l) => lines.push(l));
  t.teardown(() => agent.close());

  const c = new H2Client(sock, TOKEN);
  t.teardown(() => c.close());

  // A fresh agent serves nothing until the control plane enrolls it with the secret it drops (host-side code).
  t.equal((await c.request('GET', '/health')).status, 401, 'nothing is served before the enrollment');
  t.equal((await c.request('POST', '/auth/enroll', { key: TOKEN })).status, 401, 'no secret dropped: refused');
  const secret = dropEnrollmentSecret(chanDir);
  t.equal((await c.request('POST', '/auth/enroll', { key: TOKEN }, { authorization: `Bearer ${secret}` })).status, 204, 'enrolled');
  t.notOk(fs.existsSync(enrollFile), 'the secret is consumed: nothing lies in the channel directory');

  // The desktop comes up within the agent's poll interval.
  let health = await c.request('GET', '/health');
  for (let i = 0; i < 40 && !health.json().desktop.up; i++) {
    await new Promise((r) => setTimeout(r, 100));
    health = await c.request('GET', '/health');
  }
  t.equal(health.status, 200);
  t.equal(health.json().desktop.up, true);

  const shot = await c.request('GET', '/screenshot?format=png');
  t.equal(shot.status, 200);
  const frame = await decodeToRgb(Buffer.from(shot.json().image, 'base64'));
  t.equal(frame.width, shot.json().display.width);
  t.equal(frame.height, shot.json().display.height);

  const ex = await c.request('POST', '/exec', { command: ['sh', '-c', 'id -un; exit 3'] });
  t.equal(ex.status, 200);
  t.equal(ex.json().stdout, 'agent\n');
  t.equal(ex.json().exit_code, 3);

  for (const p of [enrollFile, chanDir, sock, `${chanDir}/../chan/token`, '/proc/self/environ']) {
    const r = await c.request('GET', `/files/content?path=${encodeURIComponent(p)}`);
    t.equal(r.status, 403, `denied: ${p}`);
    t.equal(r.json().error.code, 'permission_denied');
    t.notOk(r.body.toString().includes(TOKEN));
  }
  const link = path.join(dir, 'innocent');
  fs.symlinkSync(enrollFile, link);
  t.equal((await c.request('GET', `/files/content?path=${encodeURIComponent(link)}`)).status, 403, 'symlink to the token');

  const term = await c.request('POST', '/terminals', { command: ['sleep', '30'] });
  t.equal(term.status, 200);
  const list = await c.request('GET', '/terminals');
  t.ok(list.json().terminals.some((x: { id: string }) => x.id === term.json().id));
  t.ok([200, 204].includes((await c.request('DELETE', `/terminals/${term.json().id}`)).status));

  const bad = new H2Client(sock, 'not-the-token-at-all-xxxxxxxx');
  t.equal((await bad.request('GET', '/health')).status, 401);
  await bad.close();

  await new Promise((r) => setTimeout(r, 50));
  const logged = JSON.stringify(lines);
  t.ok(lines.some((l) => l.event === 'request' && l.route === '/exec'));
  for (const s of [TOKEN, enrollFile, dir, 'id -un', 'environ']) t.notOk(logged.includes(s), `log never shows ${s}`);
});

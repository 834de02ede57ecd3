/**
 * Issue #10 item 10: a large file write must never cost the machine's other requests. Before the fix
 * a >= 31 MB write (~41 MB of JSON) exceeded Node's default HTTP/2 session memory (10 MB) on the
 * control plane's pool and the agent, so a concurrent request on the same session was refused
 * (a 503 through /v1); and the base64 check overflowed V8's regexp stack (a 500) from ~20 MB on.
 * Real agent server (unix socket) and the control plane's real AgentPool over it.
 */
import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { AgentPool } from '../../control-plane/src/agent-client/pool.js';
import { dropEnrollmentSecret } from '../../control-plane/src/substrate/substrate.js';
import { createFileService } from '../../agent/src/files/service.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { MAX_WRITE_BODY_BYTES } from '../../shared/schemas/files.js';
import { agentPaths, startAgent, q, TOKEN, type TestAgent } from '../helpers/agent-files-exec.js';

let agent: TestAgent;
let pool: AgentPool;
t.before(async () => {
  const p = agentPaths('h2-large-');
  const svc = createFileService({ deny: { enrollFile: p.enrollFile, channelPaths: [p.sock] } });
  // One root FileService for both users: this file tests file semantics, not the user switch (files-user.test.ts).
  agent = await startAgent(p, [filesRoutes({ root: svc, agent: svc })]);
  pool = new AgentPool({ openChannel: async () => net.connect(p.sock), issueEnrollment: async () => dropEnrollmentSecret(p.dir), requestTimeoutMs: 120_000 });
});
t.teardown(async () => {
  await pool.close();
  await agent.close();
});

const MB = 1024 * 1024;
const writeBody = (bytes: number) => JSON.stringify({ content: Buffer.alloc(bytes, 0x5a).toString('base64'), encoding: 'base64' });

t.test('a 31 MB write and a concurrent request on the same session both succeed', async (t) => {
  const session = await pool.session('m', TOKEN);
  const target = path.join(agent.dir, 'big.bin');
  const big = pool.request('m', TOKEN, { method: 'PUT', path: `/files/content?path=${q(target)}`, body: writeBody(31 * MB) });
  // Issued while the big body is still in flight on the shared session.
  const small = pool.request('m', TOKEN, { method: 'GET', path: `/files?path=${q(agent.dir)}` });
  const [b, s] = await Promise.all([big, small]);
  t.equal(s.status, 200, 'the concurrent request is answered');
  t.equal(b.status, 200, 'the large write succeeds');
  t.same(JSON.parse(b.body.toString()), { path: target, size: 31 * MB, written: 31 * MB });
  t.equal(fs.statSync(target).size, 31 * MB);
  t.equal(await pool.session('m', TOKEN), session, 'the same session carries on');
});

t.test('a body over the limit fails alone, as its own stream', async (t) => {
  const session = await pool.session('m', TOKEN);
  const over = 'x'.repeat(MAX_WRITE_BODY_BYTES + MB);
  const big = pool.request('m', TOKEN, { method: 'PUT', path: `/files/content?path=${q(path.join(agent.dir, 'over.bin'))}`, body: over });
  const small = pool.request('m', TOKEN, { method: 'GET', path: `/files?path=${q(agent.dir)}` });
  const [b, s] = await Promise.all([big, small]);
  t.equal(b.status, 400, 'the oversize body is refused in the envelope');
  t.equal(JSON.parse(b.body.toString()).error.code, 'invalid_request');
  t.equal(s.status, 200, 'the concurrent request is answered');
  t.equal(await pool.session('m', TOKEN), session, 'the same session carries on');
  const after = await pool.request('m', TOKEN, { method: 'GET', path: `/files?path=${q(agent.dir)}` });
  t.equal(after.status, 200, 'and serves the next request');
});

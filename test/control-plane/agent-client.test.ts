/**
 * The agent-client pool against the REAL agent app over a real unix socket: pooling, error relay,
 * a dead or silent agent yields 503 (never a hang), and reconnection after the agent restarts.
 */
import t, { type Test } from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createAgentApp } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { listenUnix } from '../../agent/src/channel/unix-socket.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { AgentPool } from '../../control-plane/src/agent-client/pool.js';
import { ENROLL_FILE_NAME, dropEnrollmentSecret } from '../../control-plane/src/substrate/substrate.js';
import { Enrollment } from '../../agent/src/enrollment.js';
import { readAgentAnswer } from '../../control-plane/src/agent-client/answer.js';
import { AppError } from '../../shared/errors.js';

const TOKEN = 'agent-token-' + 'z'.repeat(32);

async function startAgent(sock: string) {
  // A fresh agent process each time: it holds no key until the pool enrolls it with the secret dropped beside it.
  const app = createAgentApp({ enrollment: new Enrollment({ kind: 'file', path: path.join(path.dirname(sock), ENROLL_FILE_NAME) }), log: () => {}, mounts: [execRoutes()] });
  const server = createAgentServer(app, () => {});
  const listener = await listenUnix(server, sock);
  const sockets = new Set<net.Socket>();
  listener.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    /** Simulates the agent process dying: the listener and every connection go away. */
    async kill() {
      for (const s of sockets) s.destroy();
      server.close();
      await new Promise<void>((r) => listener.close(() => r()));
    },
  };
}

function dialer(sock: string) {
  let dials = 0;
  return {
    get dials() {
      return dials;
    },
    /** The container substrate's own secret drop, into the socket's directory. */
    issueEnrollment: async (_id: string) => dropEnrollmentSecret(path.dirname(sock)),
    open: (_id: string) =>
      new Promise<net.Socket>((resolve, reject) => {
        dials++;
        const s = net.connect(sock);
        s.once('connect', () => resolve(s));
        s.once('error', (e) => reject(e));
      }),
  };
}

function poolChannel(d: ReturnType<typeof dialer>) {
  return { openChannel: d.open, issueEnrollment: d.issueEnrollment };
}

async function expect503(t: Test, p: Promise<unknown>, what: string) {
  try {
    await p;
    t.fail(`${what}: expected a rejection`);
  } catch (e) {
    t.ok(e instanceof AppError && e.code === 'compute_unavailable', `${what}: 503 compute_unavailable`);
  }
}

t.test('pooled requests, envelopes, restart and dead agent', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-client-'));
  const sock = path.join(dir, 'agent.sock');
  let agent = await startAgent(sock);
  const d = dialer(sock);
  const pool = new AgentPool({ ...poolChannel(d), connectTimeoutMs: 1000, requestTimeoutMs: 2000 });
  t.teardown(async () => {
    await pool.close();
    await agent.kill().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const exec = (cmd: string[]) => pool.request('mch_a', TOKEN, { method: 'POST', path: '/exec', body: JSON.stringify({ command: cmd, user: 'root' }), requestId: 'req_fromcp' });
  const r = await exec(['echo', 'hi']);
  t.equal(r.status, 200);
  t.equal(JSON.parse(r.body.toString()).stdout, 'hi\n');
  // many concurrent requests share one session
  const many = await Promise.all(Array.from({ length: 20 }, (_, i) => exec(['echo', String(i)])));
  t.same(many.map((x) => JSON.parse(x.body.toString()).stdout), Array.from({ length: 20 }, (_, i) => `${i}\n`));
  t.equal(d.dials, 1, 'one connection for every request');

  // an agent error envelope becomes the same error (code, details) for the control plane to render
  const bad = await pool.request('mch_a', TOKEN, { method: 'POST', path: '/exec', body: '{"command":[]}', requestId: 'req_fromcp' });
  t.equal(bad.status, 400);
  t.throws(() => readAgentAnswer('exec', bad), { code: 'invalid_request', details: [{ field: 'command' }] });
  t.match(readAgentAnswer('exec', r), { stdout: 'hi\n', stderr: '', exit_code: 0, signal: null, timed_out: false }, 'a success answer is parsed against its schema');
  // the agent refusing the token never surfaces as 401 to the API client
  const wrongToken = await pool.request('mch_a', 'x'.repeat(40), { method: 'POST', path: '/exec', body: '{"command":["true"]}' });
  t.equal(wrongToken.status, 401);
  t.throws(() => readAgentAnswer('exec', wrongToken), { code: 'compute_unavailable' });

  // the agent restarts: the pool notices the dead session and dials again
  await agent.kill();
  await expect503(t, exec(['true']), 'agent down');
  agent = await startAgent(sock);
  const back = await exec(['echo', 'back']);
  t.equal(JSON.parse(back.body.toString()).stdout, 'back\n', 'reconnected after the agent restarted');
  t.ok(d.dials >= 2, 'a new connection was dialed');

  // dead agent: the socket is gone entirely
  await agent.kill();
  fs.rmSync(sock, { force: true });
  await expect503(t, exec(['true']), 'socket gone');
  await expect503(t, exec(['true']), 'still gone');

  // a request longer than its deadline: 503, and the session stays usable
  agent = await startAgent(sock);
  await expect503(t, pool.request('mch_a', TOKEN, { method: 'POST', path: '/exec', body: JSON.stringify({ command: ['sleep', '5'], user: 'root' }), timeoutMs: 300 }), 'deadline');
  t.equal((await exec(['echo', 'ok'])).status, 200, 'usable after a deadline miss');
});

t.test('a silent peer (accepts, never speaks HTTP/2) gives 503 within the connect deadline', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-client-'));
  const sock = path.join(dir, 'silent.sock');
  const held: net.Socket[] = [];
  const silent = net.createServer((s) => held.push(s));
  await new Promise<void>((r) => silent.listen(sock, () => r()));
  const pool = new AgentPool({ ...poolChannel(dialer(sock)), connectTimeoutMs: 300 });
  t.teardown(async () => {
    await pool.close();
    for (const s of held) s.destroy();
    await new Promise<void>((r) => silent.close(() => r()));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await expect503(t, pool.request('mch_s', TOKEN, { method: 'GET', path: '/health' }), 'silent peer');
  t.equal(pool.size, 0, 'the failed dial is not kept');
});

t.test('a peer that completes the handshake and then goes silent (a SIGSTOPped agent) fails on the health ping, not the deadline', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-client-'));
  const sock = path.join(dir, 'wedged.sock');
  const held: net.Socket[] = [];
  // An empty server SETTINGS frame (length 0, type 4, no flags, stream 0), then nothing: no SETTINGS ack, no
  // PING ack, no answer, like an agent stopped right after its handshake.
  const wedged = net.createServer((s) => {
    held.push(s);
    s.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
  });
  await new Promise<void>((r) => wedged.listen(sock, () => r()));
  const pool = new AgentPool({ ...poolChannel(dialer(sock)), connectTimeoutMs: 5_000, requestTimeoutMs: 600_000, pingTimeoutMs: 300 });
  t.teardown(async () => {
    await pool.close();
    for (const s of held) s.destroy();
    await new Promise<void>((r) => wedged.close(() => r()));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  try {
    await pool.request('mch_w', TOKEN, { method: 'GET', path: '/health' });
    t.fail('expected a rejection');
  } catch (e) {
    t.ok(e instanceof AppError && e.code === 'compute_unavailable', '503 compute_unavailable');
    // Only the ping path says this; the (10-minute) deadline would say "did not answer in time".
    t.equal((e as AppError).message, 'The machine agent is not responding.');
  }
  t.equal(pool.size, 0, 'the wedged session is not kept');
});

t.test('a fresh agent whose enrollment proof is refused (a guest raced for the secret) is a 503, then recovers', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-client-'));
  const sock = path.join(dir, 'agent.sock');
  const agent = await startAgent(sock);
  const d = dialer(sock);
  let raced = true;
  const pool = new AgentPool({
    openChannel: d.open,
    issueEnrollment: async (id) => {
      const secret = await d.issueEnrollment(id);
      // Guest root takes the secret before the agent reads it: the host's proof then matches nothing.
      if (raced) fs.rmSync(path.join(dir, ENROLL_FILE_NAME));
      return secret;
    },
    connectTimeoutMs: 2000,
  });
  t.teardown(async () => {
    await pool.close();
    await agent.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  try {
    await pool.request('mch_r', TOKEN, { method: 'POST', path: '/exec', body: JSON.stringify({ command: ['true'], user: 'root' }) });
    t.fail('expected a rejection');
  } catch (e) {
    t.ok(e instanceof AppError && e.code === 'compute_unavailable', '503 compute_unavailable');
    t.equal((e as AppError).message, 'The machine agent refused its enrollment.');
  }
  t.equal(pool.size, 0, 'the unenrolled session is not kept');
  raced = false;
  const r = await pool.request('mch_r', TOKEN, { method: 'POST', path: '/exec', body: JSON.stringify({ command: ['echo', 'ok'], user: 'root' }) });
  t.equal(JSON.parse(r.body.toString()).stdout, 'ok\n', 'the next request enrolls it with a fresh secret');
});

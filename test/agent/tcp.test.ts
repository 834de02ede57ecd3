/**
 * The agent's TCP stream route over the real channel (HTTP/2 on a unix socket) to real loopback servers:
 * bytes both ways, half-close, a reset cutting the guest-side connection, refusal, port validation, auth.
 */
import t from 'tap';
import http2 from 'node:http2';
import net from 'node:net';
import { tcpRoutes } from '../../agent/src/routes/tcp.js';
import { agentPaths, startAgent, TOKEN, type TestAgent } from '../helpers/agent-files-exec.js';

let agent: TestAgent;
t.before(async () => {
  agent = await startAgent(agentPaths('tcp-'), [tcpRoutes()]);
});
t.teardown(() => agent.close());

function listen(host: string, onConn: (s: net.Socket) => void): Promise<{ port: number; server: net.Server }> {
  return new Promise((resolve, reject) => {
    // Half-open: a server that answers after the client's end (as the tests below do).
    const server = net.createServer({ allowHalfOpen: true }, onConn);
    server.once('error', reject);
    server.listen(0, host, () => resolve({ port: (server.address() as net.AddressInfo).port, server }));
  });
}

function connect(path: string, token = TOKEN) {
  const s = agent.client.session.request(
    { ':method': 'POST', ':path': path, authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
    { endStream: false },
  );
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  s.on('error', () => {});
  // As the control plane does: once the answer is over, our half goes too.
  s.on('end', () => s.end());
  const response = new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
    s.once('response', resolve);
    s.once('close', () => reject(new Error('closed without response')));
  });
  const ended = new Promise<void>((resolve) => s.once('close', () => resolve()));
  const body = () => Buffer.concat(chunks);
  const waitFor = async (pred: (b: Buffer) => boolean) => {
    for (let i = 0; i < 1500 && !pred(body()); i++) await new Promise((r) => setTimeout(r, 10));
    return body();
  };
  return { s, response, ended, body, waitFor };
}

t.test('bytes both ways, then a half-close lets the answer finish', async (t) => {
  const { port, server } = await listen('127.0.0.1', (sock) => {
    const got: Buffer[] = [];
    sock.on('data', (d) => {
      got.push(d);
      sock.write(Buffer.concat([Buffer.from('echo:'), d]));
    });
    sock.on('end', () => sock.end(`total:${Buffer.concat(got).length}`));
  });
  t.teardown(() => server.close());
  const c = connect(`/tcp/${port}/connect`);
  const h = await c.response;
  t.equal(h[':status'], 200);
  t.match(h['x-request-id'], /^req_/);
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  c.s.write(all);
  const b = await c.waitFor((x) => x.length >= 5 + 256);
  t.ok(b.equals(Buffer.concat([Buffer.from('echo:'), all])), 'every byte value went to the guest port and back');
  c.s.end();
  await c.ended;
  t.equal(c.body().subarray(5 + 256).toString(), 'total:256', 'the answer after our half-close arrived, then the stream ended');
  t.match(agent.lines.find((l) => l.event === 'request' && l.route === '/tcp/:port/connect'), { method: 'POST', status: 200 }, 'logged by route template');
});

t.test('a large transfer keeps every byte (backpressure both ways)', async (t) => {
  const size = 32 * 1024 * 1024;
  const { port, server } = await listen('127.0.0.1', (sock) => {
    let n = 0;
    sock.on('data', (d) => (n += d.length));
    sock.on('end', () => {
      const chunk = Buffer.alloc(1024 * 1024, 7);
      let left = size;
      const pump = () => {
        while (left > 0) {
          left -= chunk.length;
          if (!sock.write(chunk)) return void sock.once('drain', pump);
        }
        sock.end(`|${n}`);
      };
      pump();
    });
  });
  t.teardown(() => server.close());
  const c = connect(`/tcp/${port}/connect`);
  await c.response;
  const up = Buffer.alloc(8 * 1024 * 1024, 1);
  c.s.end(up);
  await c.ended;
  const b = c.body();
  t.equal(b.length, size + `|${up.length}`.length);
  t.equal(b.subarray(size).toString(), `|${up.length}`, 'the guest received all 8 MB we sent');
});

t.test('resetting the stream closes the guest-side connection at once', async (t) => {
  let closed!: () => void;
  const guestClosed = new Promise<void>((r) => (closed = r));
  const { port, server } = await listen('127.0.0.1', (sock) => {
    sock.on('end', () => closed());
    sock.on('error', () => {});
  });
  t.teardown(() => server.close());
  const c = connect(`/tcp/${port}/connect`);
  await c.response;
  c.s.close(http2.constants.NGHTTP2_CANCEL);
  await guestClosed;
  t.pass('the guest saw its connection end');
});

t.test('the guest closing ends the stream', async (t) => {
  const { port, server } = await listen('127.0.0.1', (sock) => sock.end('bye'));
  t.teardown(() => server.close());
  const c = connect(`/tcp/${port}/connect`);
  await c.response;
  await c.ended;
  t.equal(c.body().toString(), 'bye');
});

t.test('a server bound to ::1 only is reached too', async (t) => {
  let srv: { port: number; server: net.Server };
  try {
    srv = await listen('::1', (sock) => sock.end('six'));
  } catch {
    t.plan(0, 'no IPv6 loopback on this host');
    return;
  }
  t.teardown(() => srv.server.close());
  const c = connect(`/tcp/${srv.port}/connect`);
  t.equal((await c.response)[':status'], 200);
  await c.ended;
  t.equal(c.body().toString(), 'six');
});

t.test('nothing listening: 503 in the envelope, naming the port', async (t) => {
  const { port, server } = await listen('127.0.0.1', () => {});
  await new Promise<void>((r) => server.close(() => r()));
  const r = await agent.client.request('POST', `/tcp/${port}/connect`);
  t.equal(r.status, 503);
  t.equal(r.json().error.code, 'compute_unavailable');
  t.equal(r.json().error.message, `Nothing is listening on port ${port}.`);
});

t.test('ports are validated: 1-65535, digits only', async (t) => {
  for (const bad of ['0', '65536', '99999', 'abc', '080', '-1', '1e3', '%2080']) {
    const r = await agent.client.request('POST', `/tcp/${bad}/connect`);
    t.equal(r.status, 400, `port ${bad}`);
    t.equal(r.json().error.code, 'invalid_request');
    t.equal(r.json().error.details[0].field, 'port');
  }
});

t.test('the machine token is required', async (t) => {
  const c = connect('/tcp/80/connect', 'wrong');
  t.equal((await c.response)[':status'], 401);
});

import t from 'tap';
import http2 from 'node:http2';
import { Duplex } from 'node:stream';
import { Hono } from 'hono';
import { createAgentApp, type AgentEnv } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { serveByteChannel, type ByteChannel } from '../../agent/src/channel/virtio-serial.js';
import { enrolledWith } from '../helpers/agent-enrollment.js';

const TOKEN = 'virtio-test-token-0123456789';

/**
 * An in-memory port with the virtio-serial semantics measured on QEMU (see the bridge's comment):
 * guest read() returns 0 at once while the host is away, guest writes are dropped while it is away.
 * The real port is exercised by the VM substrate's integration test.
 */
class FakePort implements ByteChannel {
  private queue: Buffer[] = [];
  private waiter: ((n: number) => void) | null = null;
  private waitBuf: Buffer | null = null;
  private host: Duplex | null = null;
  zeroReads = 0;
  dropped = 0;

  read(buf: Buffer): Promise<number> {
    if (this.queue.length) return Promise.resolve(this.take(buf));
    if (!this.host) {
      this.zeroReads++;
      return new Promise((r) => setImmediate(() => r(0)));
    }
    return new Promise((resolve) => {
      this.waitBuf = buf;
      this.waiter = resolve;
    });
  }

  private take(buf: Buffer): number {
    const head = this.queue[0]!;
    const n = Math.min(head.length, buf.length);
    head.copy(buf, 0, 0, n);
    if (n === head.length) this.queue.shift();
    else this.queue[0] = head.subarray(n);
    return n;
  }

  private wake(): void {
    if (!this.waiter) return;
    const w = this.waiter;
    const b = this.waitBuf!;
    this.waiter = null;
    this.waitBuf = null;
    if (this.queue.length) w(this.take(b));
    else w(0);
  }

  async write(buf: Buffer): Promise<void> {
    if (this.host) this.host.push(Buffer.from(buf));
    else this.dropped += buf.length;
  }

  close(): void {}

  /** Host opens its end of the port; returns the byte stream an HTTP/2 client can run on. */
  connectHost(): Duplex {
    const port = this;
    const d: Duplex = new Duplex({
      read() {},
      write(chunk: Buffer, _e, cb) {
        if (port.host === d) {
          port.queue.push(Buffer.from(chunk));
          port.wake();
        }
        cb();
      },
    });
    d.on('error', () => {});
    this.host = d;
    return d;
  }

  /** Host closes its end: the guest sees read()=0. */
  disconnectHost(): void {
    const h = this.host;
    this.host = null;
    h?.push(null);
    h?.destroy();
    this.wake();
  }
}

function h2Over(port: FakePort): http2.ClientHttp2Session {
  const s = http2.connect('http://agent', { createConnection: () => port.connectHost() as never });
  s.on('error', () => {});
  return s;
}

function get(s: http2.ClientHttp2Session, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = s.request({ ':method': 'GET', ':path': path, authorization: `Bearer ${TOKEN}` });
    let status = 0;
    let body = '';
    req.on('response', (h) => (status = Number(h[':status'])));
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => resolve({ status, body }));
    req.on('error', reject);
  });
}

t.test('HTTP/2 over a virtio-like port survives host disconnects and reconnects', async (t) => {
  const mount = new Hono<AgentEnv>();
  let served = 0;
  mount.get('/n/:i', (c) => {
    served++;
    return c.json({ i: Number(c.req.param('i')) });
  });
  const app = createAgentApp({ enrollment: enrolledWith(TOKEN), log: () => {}, mounts: [mount] });
  const server = createAgentServer(app, () => {});
  const port = new FakePort();
  const bridge = serveByteChannel(server, port, { log: () => {}, idlePollMs: 5 });
  t.teardown(() => bridge.close());

  // Idle before any host: the bridge polls and sees zero reads, creating no connection.
  await new Promise((r) => setTimeout(r, 30));
  t.ok(port.zeroReads > 0, 'disconnected port reads 0');

  let s = h2Over(port);
  const first = await Promise.all(Array.from({ length: 50 }, (_, i) => get(s, `/n/${i}`)));
  t.same(first.map((r) => JSON.parse(r.body).i), Array.from({ length: 50 }, (_, i) => i), '50 concurrent requests');

  // Host goes away and comes back: the first request on the new connection must be answered.
  port.disconnectHost();
  s.destroy();
  await new Promise((r) => setTimeout(r, 20));
  s = h2Over(port);
  const again = await get(s, '/n/7');
  t.equal(again.status, 200);
  t.same(JSON.parse(again.body), { i: 7 });

  // Several cycles in a row, each with a burst.
  for (let cycle = 0; cycle < 5; cycle++) {
    port.disconnectHost();
    s.destroy();
    s = h2Over(port);
    const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => get(s, `/n/${cycle * 100 + i}`)));
    t.ok(rs.every((r, i) => r.status === 200 && JSON.parse(r.body).i === cycle * 100 + i), `cycle ${cycle}`);
  }
  t.equal(served, 50 + 1 + 50);
  s.destroy();
  port.disconnectHost();
});

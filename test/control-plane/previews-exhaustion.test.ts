/**
 * Issue 22 item 4: stalled preview downloads grew the control plane's memory (~4.8 MiB each, the 8 MiB
 * stream window of `/tcp/{port}/connect` streams). The attack: clients that open a download from an app that
 * writes without end, read the status line and never read again. The bound: each open preview connection
 * holds at most its 256 KiB stream window plus 128 KiB of Node's buffers (384 KiB), at most a set number
 * of connections per machine, and at most a global budget in all. Measured through the proxy's own count of
 * the bytes its connections hold (Http2Stream and socket buffers), sampled at every write the flooding app
 * makes and once every download has stalled (its stream's receive window used up, as the control plane's
 * HTTP/2 state reports it: no more bytes can arrive); nothing is timed. Real listener, API, agent TCP route (fake
 * substrate, in-process agent), a flooding TCP listener as the app.
 */
import t from 'tap';
import { Hono } from 'hono';
import net from 'node:net';
import type { AgentEnv } from '../../agent/src/app.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { previewHost, previewRequest } from '../helpers/preview-client.js';
import { publicPreviewOf } from '../helpers/raw-guest.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';

/** 256 KiB window + 128 KiB of buffers: the most one open preview connection may hold. */
const PER_CONNECTION = 384 * 1024;
const PER_MACHINE = 4;
const BUDGET = 6 * PER_CONNECTION;

/** Resolves once `pred()` holds (a hang guard fails it after 60 s: this is a wait, not a timed assertion). */
async function until(pred: () => boolean, what: string): Promise<void> {
  const guard = Date.now() + 60_000;
  while (!pred()) {
    if (Date.now() > guard) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Sends a GET, reads the first bytes (the status line) and then never reads again. */
function stalledClient(port: number, host: string): Promise<{ status: number; sock: net.Socket }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', reject);
    sock.once('data', (d: Buffer) => {
      sock.pause();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(d.toString('latin1'))?.[1] ?? 0), sock });
    });
    sock.write(`GET /download HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  });
}

t.test('never-reading preview clients: the control plane holds a bounded number of bytes', { timeout: 180_000 }, async (t) => {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  const served = await serveWithGateway(rig, { previews: { limits: { perMachine: PER_MACHINE, budgetBytes: BUDGET } } });
  const proxy = served.previews!;
  let peak = 0;
  const sample = () => (peak = Math.max(peak, proxy.bufferedBytes()));

  // The app: answers any request with an endless body, as fast as its socket takes it.
  const writers: Array<{ written: number }> = [];
  const chunk = Buffer.alloc(64 * 1024, 120);
  const open = new Set<net.Socket>();
  const app = net.createServer((sock) => {
    const w = { written: 0 };
    writers.push(w);
    open.add(sock);
    sock.on('error', () => {});
    sock.on('close', () => open.delete(sock));
    sock.once('data', () => {
      sock.write('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n');
      const pump = () => {
        while (!sock.destroyed) {
          w.written += chunk.length;
          const more = sock.write(chunk);
          sample();
          if (!more) return void sock.once('drain', pump);
        }
      };
      pump();
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', () => r()));
  const clients: net.Socket[] = [];
  t.teardown(async () => {
    for (const c of clients) c.destroy();
    for (const s of open) s.destroy();
    app.close();
    await served.close();
    fake.close();
    await rig.close();
  });

  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'ports:write']);
  const hostOf = async () => {
    const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
    const pv = (await rig.call('POST', `/v1/machines/${m.id}/ports`, { key: a.key, body: { port: (app.address() as net.AddressInfo).port, access: 'public' } })).json;
    return previewHost(pv.url, served.port);
  };
  const hostA = await hostOf();
  const hostB = await hostOf();
  const stall = async (host: string) => {
    const c = await stalledClient(served.port, host);
    clients.push(c.sock);
    return c.status;
  };

  // Machine A: four downloads stall, the fifth and sixth are refused (per machine).
  const onA: number[] = [];
  for (let i = 0; i < 6; i++) onA.push(await stall(hostA));
  t.same(onA, [200, 200, 200, 200, 503, 503], 'at most 4 open preview connections per machine');
  const busy = await previewRequest(served.port, hostA, { headers: { accept: 'application/json' } });
  t.equal(busy.status, 503);
  t.equal(busy.json.error.code, 'compute_unavailable', 'the envelope code agrees with its status');
  t.equal(busy.headers['retry-after'], '1');
  const busyPage = await previewRequest(served.port, hostA);
  t.match(busyPage.text, /This preview is busy/);
  t.match(busyPage.text, /too many open connections/);

  // Machine B: two more fit the budget (6 × 384 KiB), the third does not (global budget).
  const onB: number[] = [];
  for (let i = 0; i < 3; i++) onB.push(await stall(hostB));
  t.same(onB, [200, 200, 503], 'the global budget refuses the seventh connection, on another machine');
  t.equal(proxy.reservedBytes(), 6 * 384 * 1024, 'six connections reserved 384 KiB each');
  t.equal(proxy.openConnections(), 6);

  // Stalled: each client's socket buffers are full, and the agent has sent all its stream window allows
  // (the control plane's HTTP/2 state says so: nothing more can arrive until a client reads).
  await until(() => proxy.stalledConnections() === 6, 'every download to stall');
  sample();
  t.ok(proxy.bufferedBytes() >= 6 * 128 * 1024, `the stalled downloads hold their windows in the control plane (${proxy.bufferedBytes()} bytes)`);
  const written = writers.reduce((n, w) => n + w.written, 0);
  t.ok(writers.every((w) => w.written > PER_CONNECTION), `each app wrote more than one connection's bound (${(written / 2 ** 20).toFixed(1)} MiB in all)`);
  t.ok(peak <= BUDGET, `at most the budget was ever held: peak ${peak} bytes <= ${BUDGET}`);

  // Stalled clients leaving free their slots at once.
  for (const c of clients.splice(0)) c.destroy();
  await until(() => proxy.openConnections() === 0 && proxy.reservedBytes() === 0, 'the connections to close');
  t.equal(proxy.bufferedBytes(), 0);
  t.equal(await stall(hostA), 200, 'a new download is admitted again');
});

t.test('a client that leaves while its agent stream is opening leaves nothing open', { timeout: 120_000 }, async (t) => {
  // The agent's connect waits for the test's gate (middleware ahead of the real TCP route).
  let entered = () => {};
  const connecting = new Promise<void>((r) => (entered = r));
  let open = () => {};
  const gate = new Promise<void>((r) => (open = r));
  const { served, guest, host } = await publicPreviewOf(t, () => null, {
    mountsFirst: () => {
      const app = new Hono<AgentEnv>();
      app.use('/tcp/*', async (_c, next) => {
        entered();
        await gate;
        await next();
      });
      return [app];
    },
  });
  const proxy = served.previews!;

  const client = net.connect(served.port, '127.0.0.1');
  client.on('error', () => {});
  client.write(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  await connecting;
  t.equal(proxy.reservedBytes(), 384 * 1024, 'the request holds its slot while the stream opens');
  client.destroy();
  await until(() => proxy.reservedBytes() === 0, 'the slot to be released');
  open();
  await until(() => guest.closed() === 1, "the guest's connection to close");
  t.pass("the guest's connection was closed, not left open behind a client that is gone");
  t.equal(proxy.openConnections(), 0);
});

/**
 * Bodies stream through the internal forward (control-plane/src/cluster/forward/forward-request.ts; issue 24 item 5,
 * issue 25 item 3): a 20 MB upload and a 20 MB download pass through a real forwarder and listener intact, with the
 * bytes this process retains (ArrayBuffer memory after a full GC, sampled as chunks arrive, never on a clock) far
 * below the body's size, so nothing holds a body whole. An owner that is not there is a 503 envelope with the
 * channel's Retry-After, for a request, an upload and an upgrade; one that dies mid-answer cuts the caller's
 * connection instead of ending the answer as if it were whole.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import t from 'tap';
import { closeServer, listenOn, startEdge, startOwner } from '../../helpers/forward-rig.js';

v8.setFlagsFromString('--expose-gc');
const gc: () => void = vm.runInNewContext('gc');

const MB = 1024 * 1024;
const CHUNK = 64 * 1024;
const CHUNKS = (20 * MB) / CHUNK;
/** Far below 20 MB, far above what a streaming path holds (a few socket reads and stream buffers per hop). */
const RETAINED_BOUND = 4 * MB;

const chunk = (i: number) => Buffer.alloc(CHUNK, i % 251);
const expectedDigest = (() => {
  const h = createHash('sha256');
  for (let i = 0; i < CHUNKS; i++) h.update(chunk(i));
  return h.digest('hex');
})();

/**
 * ArrayBuffer bytes still reachable after a full collection. Twice: V8 frees a collection's ArrayBuffers on a
 * background sweeper, which the next collection finishes first, so the second leaves only what is reachable.
 */
function retained(): number {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
}

/** Writes the 20 MB, chunk by chunk, each only once the previous one drained. */
async function writeAll(w: NodeJS.WritableStream): Promise<void> {
  for (let i = 0; i < CHUNKS; i++) {
    if (!w.write(chunk(i))) await new Promise((r) => w.once('drain', r));
  }
  w.end();
}

/** Reads a stream to its end: its digest and the most memory retained at every 16th chunk. */
async function readAll(r: AsyncIterable<Buffer>, base: number): Promise<{ digest: string; bytes: number; peak: number }> {
  const h = createHash('sha256');
  let bytes = 0;
  let n = 0;
  let peak = 0;
  for await (const c of r) {
    h.update(c);
    bytes += c.length;
    if (n++ % 16 === 0) peak = Math.max(peak, retained() - base);
  }
  return { digest: h.digest('hex'), bytes, peak };
}

t.test('a 20 MB upload and a 20 MB download stream through with bounded memory', async (t) => {
  let upload: Promise<{ digest: string; bytes: number; peak: number }> | null = null;
  let base = 0;
  const owner = await startOwner(t, {
    request: (req, res) => {
      if (req.method === 'PUT') {
        upload = readAll(req, base);
        void upload.then((u) => res.end(JSON.stringify({ bytes: u.bytes })));
        return;
      }
      res.writeHead(200, { 'content-length': String(20 * MB), 'content-type': 'application/octet-stream' });
      void writeAll(res);
    },
    upgrade: () => {},
  });
  const edge = await startEdge(t, owner.address);

  base = retained();
  const put = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: edge.port, method: 'PUT', path: '/v1/machines/mch_1/files/content', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    void writeAll(req);
  });
  t.same(put, { status: 200, body: JSON.stringify({ bytes: 20 * MB }) });
  const up = await upload!;
  t.equal(up.digest, expectedDigest, 'the upload arrived intact');
  t.ok(up.peak < RETAINED_BOUND, `upload: at most ${(up.peak / MB).toFixed(2)} MB retained while 20 MB passed`);

  base = retained();
  const down = await new Promise<{ status: number; length?: string; read: Promise<{ digest: string; bytes: number; peak: number }> }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: edge.port, method: 'GET', path: '/v1/machines/mch_1/files/content', agent: false }, (res) =>
      resolve({ status: res.statusCode ?? 0, length: res.headers['content-length'], read: readAll(res, base) }));
    req.on('error', reject);
    req.end();
  });
  t.same([down.status, down.length], [200, String(20 * MB)]);
  const d = await down.read;
  t.same([d.bytes, d.digest], [20 * MB, expectedDigest], 'the download arrived intact');
  t.ok(d.peak < RETAINED_BOUND, `download: at most ${(d.peak / MB).toFixed(2)} MB retained while 20 MB passed`);
});

const UNREACHABLE = {
  error: { code: 'compute_unavailable', message: "The machine's host is not reachable right now; retry shortly.", request_id: 'req_r1', details: [], quota: null },
};

t.test('an owner that is not there: 503 with Retry-After for a request, an upload and an upgrade', async (t) => {
  const gone = http.createServer();
  const port = await listenOn(gone);
  await closeServer(gone);
  const edge = await startEdge(t, `http://127.0.0.1:${port}`);

  for (const o of [{ method: 'GET' }, { method: 'POST', body: Buffer.alloc(2 * MB, 1) }]) {
    const a = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: edge.port, method: o.method, path: '/v1/machines/mch_1', agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end(o.body);
    });
    t.equal(a.status, 503, o.method);
    t.same([a.headers['retry-after'], a.headers['x-request-id'], a.headers['content-type']], ['2', 'req_r1', 'application/json']);
    t.same(JSON.parse(a.body), UNREACHABLE);
  }

  const raw = await new Promise<string>((resolve) => {
    const s = net.connect(edge.port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => (got += d.toString()));
    s.on('close', () => resolve(got));
    s.write('GET /v1/machines/mch_1/screen HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
  });
  t.match(raw, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
  t.match(raw, /\r\nretry-after: 2\r\n/);
  t.same(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)), UNREACHABLE);
  t.same(edge.logs.map((l) => [l.event, l.target, l.request_id]), [0, 1, 2].map(() => ['forward_failed', 'cp-owner', 'req_r1']));
  t.match(String(edge.logs[0]!.cause), /ECONNREFUSED/);
  t.equal(edge.forwarder.channels(), 0);
});

t.test('an owner that dies mid-answer cuts the caller\'s connection: a truncated answer never looks whole', async (t) => {
  const owner = await startOwner(t, {
    request: (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write(Buffer.alloc(MB, 2), () => res.destroy());
    },
    upgrade: () => {},
  });
  const edge = await startEdge(t, owner.address);
  const got = await new Promise<{ bytes: number; complete: boolean; cut: boolean }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: edge.port, path: '/v1/machines/mch_1/files/content', agent: false }, (res) => {
      let bytes = 0;
      let cut = false;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('aborted', () => (cut = true));
      res.on('error', () => (cut = true));
      res.on('close', () => resolve({ bytes, complete: res.complete, cut }));
    });
    req.on('error', reject);
    req.end();
  });
  t.same([got.complete, got.cut], [false, true]);
  t.ok(got.bytes <= MB);
});

/**
 * Published-port benchmarks (the `ports` part of `npm run bench`): the control plane started with `serve()`
 * on loopback, one container machine running the test web app (test/helpers/preview-app.ts), reached on its
 * preview hostname exactly as a browser would (Host: prv-….localhost), through the agent channel:
 *   - preview request round trip: GET / on a keep-alive connection (p50/p99), next to GET /v1/machines/{id}
 *     (the API's own floor on the same listener);
 *   - 100 MB download through the preview, against the same 100 MB read over the agent's file route
 *     (GET /v1/machines/{id}/files/content in 4 MB base64 ranges, as an SDK downloads) in the same run.
 * Run alone: `node dist/scripts/bench/ports.js`.
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../control-plane/src/config.js';
import { findRepoRoot } from '../../control-plane/src/machine-host.js';
import { serve } from '../../control-plane/src/main.js';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { defaultImageCacheDir, ensureImage } from '../../control-plane/src/substrate/image.js';
import { MAX_READ_RANGE } from '../../shared/schemas/files.js';
import { PREVIEW_APP_JS } from '../../test/helpers/preview-app.js';
import { fmt, line, measure } from './stats.js';
import { runAlone } from './run-alone.js';

const MB = 1024 * 1024;
const DOWNLOAD_MB = 100;

export async function benchPorts(o: { repoRoot?: string } = {}): Promise<void> {
  console.log('\n== published ports (container machine, preview hostname on loopback) ==');
  const repoRoot = o.repoRoot ?? findRepoRoot();
  const image = await ensureImage({ repoRoot, cacheDir: process.env.COMPUTER_IMAGE_CACHE || defaultImageCacheDir(), artifacts: 'container', log: (l) => console.log(`# image: ${l}`) });
  const root = fs.mkdtempSync('/tmp/bpt-');
  const substrate = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000 });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-ports-'));
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as net.AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });
  const config = parseConfig({ PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, WARM_POOL_PER_SIZE: '0' });
  const running = await serve(config, { log: () => {}, services: { substrate, passwordCost: { N: 1024, r: 8, p: 1 } } });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const call = (method: string, p: string, o2: { host?: string; headers?: Record<string, string>; body?: unknown; sink?: (n: number) => void } = {}) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
      const headers: Record<string, string> = { ...o2.headers };
      if (o2.host) headers.host = o2.host;
      if (o2.body !== undefined) headers['content-type'] = 'application/json';
      const req = http.request({ host: '127.0.0.1', port, method, path: p, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => (o2.sink ? o2.sink(c.length) : chunks.push(c)));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(o2.body === undefined ? undefined : JSON.stringify(o2.body));
    });
  let machineId = '';
  let key = '';
  try {
    const origin = running.url;
    const su = await call('POST', '/v1/auth/signup', { body: { email: 'bench-ports@example.com', password: 'bench password 123' } });
    const cookie = `computer_session=${/computer_session=([^;]+)/.exec(String(su.headers['set-cookie']))![1]}`;
    const co = JSON.parse((await call('POST', '/v1/billing/checkout', { headers: { cookie, origin }, body: { plan_id: 'pro', success_url: `${origin}/` } })).text);
    await call('GET', new URL(co.url).pathname);
    key = JSON.parse((await call('POST', '/v1/api-keys', { headers: { cookie, origin }, body: { name: 'bench', scopes: ['machines:read', 'machines:write', 'machines:control', 'ports:write'] } })).text).secret;
    const auth = { authorization: `Bearer ${key}` };
    const m = await call('POST', '/v1/machines', { headers: auth, body: {} });
    if (m.status !== 201) throw new Error(`create ${m.status} ${m.text}`);
    machineId = JSON.parse(m.text).id;
    const base = `/v1/machines/${machineId}`;
    for (let i = 0; (await call('POST', `${base}/exec`, { headers: auth, body: { command: ['true'] } })).status !== 200; i++) {
      if (i > 200) throw new Error('the agent never answered');
      await new Promise((r) => setTimeout(r, 250));
    }
    await call('PUT', `${base}/files/content?path=${encodeURIComponent('/home/agent/app.cjs')}`, { headers: auth, body: { content: PREVIEW_APP_JS } });
    await call('POST', `${base}/exec`, {
      headers: auth,
      body: { command: ['sh', '-c', `node /home/agent/app.cjs 3000 >/dev/null 2>&1 & head -c ${DOWNLOAD_MB * MB} /dev/urandom > /tmp/big.bin`] },
    });
    const pv = JSON.parse((await call('POST', `${base}/ports`, { headers: auth, body: { port: 3000, access: 'private' } })).text);
    const host = `${new URL(pv.url).hostname}:${port}`;
    const bearer = { authorization: `Bearer ${pv.secret}` };
    for (let i = 0; (await call('GET', '/', { host, headers: bearer })).status !== 200; i++) {
      if (i > 200) throw new Error('the app never answered through the preview');
      await new Promise((r) => setTimeout(r, 250));
    }

    line('preview GET / round trip (keep-alive)', fmt(await measure(300, () => call('GET', '/', { host, headers: bearer }), 20)));
    line('GET /v1/machines/{id} (same listener)', fmt(await measure(300, () => call('GET', base, { headers: auth }), 20)));

    const through = async (): Promise<number> => {
      let n = 0;
      const t0 = performance.now();
      const r = await call('GET', `/big?mb=${DOWNLOAD_MB}`, { host, headers: bearer, sink: (k) => (n += k) });
      const s = (performance.now() - t0) / 1000;
      if (r.status !== 200 || n !== DOWNLOAD_MB * MB) throw new Error(`preview download: ${r.status}, ${n} bytes`);
      return s;
    };
    const viaFiles = async (): Promise<number> => {
      let n = 0;
      const t0 = performance.now();
      for (let off = 0; off < DOWNLOAD_MB * MB; off += MAX_READ_RANGE) {
        const r = await call('GET', `${base}/files/content?path=%2Ftmp%2Fbig.bin&encoding=base64&offset=${off}&length=${MAX_READ_RANGE}`, { headers: auth });
        if (r.status !== 200) throw new Error(`files read ${r.status} ${r.text.slice(0, 200)}`);
        n += Buffer.from(JSON.parse(r.text).content, 'base64').length;
      }
      const s = (performance.now() - t0) / 1000;
      if (n !== DOWNLOAD_MB * MB) throw new Error(`files download: ${n} bytes`);
      return s;
    };
    await through();
    await viaFiles();
    const a = [await through(), await through(), await through()].sort((x, y) => x - y)[1]!;
    const b = [await viaFiles(), await viaFiles(), await viaFiles()].sort((x, y) => x - y)[1]!;
    line(`${DOWNLOAD_MB} MB through the preview`, `${(DOWNLOAD_MB / a).toFixed(0)} MB/s  (${a.toFixed(2)} s, median of 3)`);
    line(`${DOWNLOAD_MB} MB over the file route (4 MB base64)`, `${(DOWNLOAD_MB / b).toFixed(0)} MB/s  (${b.toFixed(2)} s, median of 3)`);
  } finally {
    agent.destroy();
    if (machineId) await substrate.destroy(machineId).catch(() => {});
    await running.close();
    await substrate.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runAlone(import.meta.url, benchPorts);

/**
 * API benchmarks (the API part of `npm run bench`), measured through /v1 over real HTTP against the
 * control plane started with `serve()` on loopback:
 *   create → running and → display up, screenshot JPEG p50/p99 next to the agent-side floor (the same
 *   request sent straight to the agent in the same run), pointer and key p50, exec round trip, and
 *   GET /v1/machines/{id} throughput and p99, and that throughput with metering off vs on (issue 15: ≤ 5%).
 * `substrate: 'container'` uses the real guest image; `'host'` runs the real agent on this host (real
 * Xvfb) behind the fake substrate's channel, which isolates the control plane's own cost.
 * Run alone: `node dist/scripts/bench/api.js [container|host]`.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Duplex } from 'node:stream';
import { Agent, request as undiciRequest } from 'undici';
import { createAgentApp } from '../../agent/src/app.js';
import { Enrollment } from '../../agent/src/enrollment.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { createDesktop, type Desktop } from '../../agent/src/desktop/desktop.js';
import { desktopRoutes } from '../../agent/src/routes/desktop.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { parseConfig } from '../../control-plane/src/config.js';
import { findRepoRoot } from '../../control-plane/src/machine-host.js';
import { serve } from '../../control-plane/src/main.js';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { defaultImageCacheDir, ensureImage } from '../../control-plane/src/substrate/image.js';
import type { Substrate } from '../../control-plane/src/substrate/substrate.js';
import { fmt, line, measure, percentile } from './stats.js';
import { runAlone } from './run-alone.js';

export interface ApiBenchOptions {
  substrate: 'container' | 'host';
  repoRoot?: string;
  samples?: number;
}

interface Host {
  substrate: Substrate;
  /** The agent-side floor: the same request straight to the agent, skipping /v1. */
  direct(machineId: string, token: string, method: string, p: string, body?: unknown): Promise<number>;
  close(): Promise<void>;
}

/** The real agent on this host (a real Xvfb desktop, exec) behind the fake substrate's channel, shared by every machine. */
export async function hostAgent(): Promise<Host> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-api-'));
  const fbdir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-fb-'));
  let n = 90;
  while (fs.existsSync(`/tmp/.X11-unix/X${n}`)) n++;
  const xvfb: ChildProcess = spawn('Xvfb', [`:${n}`, '-screen', '0', '2560x1600x24', '-fbdir', fbdir, '-noreset', '-nolisten', 'tcp'], { stdio: 'ignore' });
  for (let i = 0; i < 100 && !fs.existsSync(path.join(fbdir, 'Xvfb_screen0')); i++) await new Promise((r) => setTimeout(r, 50));
  const desktop: Desktop = await createDesktop({ display: `:${n}`, fbdir, log: () => {}, browser: { command: 'chromium', sandbox: false, userName: 'agent' } });
  const servers = new Map<string, ReturnType<typeof createAgentServer>>();
  const apps = new Map<string, ReturnType<typeof createAgentApp>>();
  // eslint-disable-next-line prefer-const
  let sub: FakeSubstrate;
  sub = new FakeSubstrate({
    channelHandler: (id: string, end: Duplex) => {
      let s = servers.get(id);
      if (!s) {
        const app = createAgentApp({ enrollment: new Enrollment({ kind: 'channel' }), log: () => {}, mounts: [desktopRoutes(desktop), execRoutes({ display: `:${n}` })] });
        apps.set(id, app);
        s = createAgentServer(app, () => {});
        servers.set(id, s);
      }
      s.emit('connection', end);
    },
  });
  return {
    substrate: sub,
    async direct(id, token, method, p, body) {
      const app = apps.get(id)!;
      const t0 = process.hrtime.bigint();
      const r = await app.request(p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      await r.arrayBuffer();
      return Number(process.hrtime.bigint() - t0) / 1e6;
    },
    async close() {
      for (const s of servers.values()) s.close();
      desktop.close();
      xvfb.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(fbdir, { recursive: true, force: true });
    },
  };
}

export async function containerHost(repoRoot: string): Promise<Host & { substrate: ContainerSubstrate }> {
  const image = await ensureImage({ repoRoot, cacheDir: process.env.COMPUTER_IMAGE_CACHE || defaultImageCacheDir(), artifacts: 'container', log: (l) => console.log(`# image: ${l}`) });
  const root = fs.mkdtempSync('/tmp/bapi-');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000 });
  const http2 = await import('node:http2');
  const sessions = new Map<string, import('node:http2').ClientHttp2Session>();
  return {
    substrate: sub,
    direct(id, token, method, p, body) {
      let s = sessions.get(id);
      if (!s || s.closed) {
        s = http2.connect('http://agent', { createConnection: () => net.connect(sub.channelPath(id)) });
        s.on('error', () => {});
        sessions.set(id, s);
      }
      const session = s;
      return new Promise((resolve, reject) => {
        const t0 = process.hrtime.bigint();
        const h: Record<string, string> = { ':method': method, ':path': p, authorization: `Bearer ${token}` };
        if (body !== undefined) h['content-type'] = 'application/json';
        const req = session.request(h, { endStream: body === undefined });
        req.on('data', () => {});
        req.on('end', () => resolve(Number(process.hrtime.bigint() - t0) / 1e6));
        req.on('error', reject);
        if (body !== undefined) req.end(JSON.stringify(body));
      });
    },
    async close() {
      for (const s of sessions.values()) s.destroy();
      for (const m of sub ? await sub.reattach() : []) await sub.destroy(m.id).catch(() => {});
      await sub?.releaseMounts();
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

/** `npm start`'s serve() on loopback over `substrate`, with its own data directory and `env` on top. */
export async function serveForBench(substrate: Substrate, env: Record<string, string>, log: (line: Record<string, unknown>) => void = () => {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-cp-'));
  // A fixed port so PUBLIC_BASE_URL (the origin cookie writes must carry) is known before listening.
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as net.AddressInfo).port;
      probe.close(() => resolve(p));
    });
  });
  const config = parseConfig({ PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, ...env });
  const running = await serve(config, { log, services: { substrate, passwordCost: { N: 1024, r: 8, p: 1 } } });
  return { running, dataDir };
}

export async function benchApi(o: ApiBenchOptions): Promise<void> {
  const samples = o.samples ?? (o.substrate === 'container' ? 3 : 5);
  const host = o.substrate === 'container' ? await containerHost(o.repoRoot ?? findRepoRoot()) : await hostAgent();
  // No warm pool: these creates are the cold path (the pool bench, pool.ts, puts warm next to cold).
  const { running, dataDir } = await serveForBench(host.substrate, { WARM_POOL_PER_SIZE: '0' });
  const base = running.url;
  const client = await benchClient(base);
  const { call, key } = client;
  const created: string[] = [];
  try {
    console.log(`# API benchmarks through /v1 (${o.substrate} substrate), ${os.cpus().length} cores`);

    const toRunning: number[] = [];
    const toDisplay: number[] = [];
    let id = '';
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      const m = await call('POST', '/v1/machines', { key, body: {} });
      if (m.status !== 201) throw new Error(`create ${m.status} ${JSON.stringify(m.json)}`);
      created.push(m.json.id);
      toRunning.push(performance.now() - t0);
      for (;;) {
        const d = await call('GET', `/v1/machines/${m.json.id}/display`, { key });
        if (d.status === 200) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      toDisplay.push(performance.now() - t0);
      id = m.json.id;
      if (i < samples - 1) {
        await call('DELETE', `/v1/machines/${m.json.id}`, { key });
        created.pop();
      }
    }
    toRunning.sort((a, b) => a - b);
    toDisplay.sort((a, b) => a - b);
    line('create → running (POST /v1/machines)', `p50 ${percentile(toRunning, 50).toFixed(0)} ms  (n=${samples})`);
    line('create → display up', `p50 ${percentile(toDisplay, 50).toFixed(0)} ms  (n=${samples})`);

    const token = await tokenOf(dataDir, id);
    const shotV1 = await measure(40, () => call('GET', `/v1/machines/${id}/screenshot?format=jpeg&quality=80`, { key }));
    const floor: number[] = [];
    for (let i = 0; i < 45; i++) {
      const ms = await host.direct(id, token, 'GET', '/screenshot?format=jpeg&quality=80');
      if (i >= 5) floor.push(ms);
    }
    floor.sort((a, b) => a - b);
    line('screenshot JPEG q80 via /v1', fmt(shotV1));
    line('screenshot JPEG q80 at the agent (floor)', `p50 ${percentile(floor, 50).toFixed(2)} ms  p99 ${percentile(floor, 99).toFixed(2)} ms  (n=40)`);

    const s = (await call('POST', '/v1/sessions', { key, body: { machine_id: id, type: 'agent' } })).json.id as string;
    const fence = String((await call('POST', `/v1/machines/${id}/input-lease`, { key, body: { session_id: s, ttl_seconds: 3600 } })).json.fence);
    const input = { 'x-session-id': s, 'x-lease-fence': fence };
    line('pointer move via /v1 (lease checked)', fmt(await measure(100, (i) => call('POST', `/v1/machines/${id}/mouse/move`, { key, body: { x: 100 + (i % 50), y: 100 }, headers: input }))));
    line('key press via /v1 (lease checked)', fmt(await measure(100, () => call('POST', `/v1/machines/${id}/keyboard/key`, { key, body: { key: 'shift' }, headers: input }))));
    line('exec round trip (true) via /v1', fmt(await measure(40, () => call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['true'] } }))));

    // Throughput: 16 concurrent clients for 3 s.
    const throughput = async (ms: number) => {
      const lat: number[] = [];
      const until = performance.now() + ms;
      const worker = async () => {
        while (performance.now() < until) {
          const t0 = performance.now();
          const r = await call('GET', `/v1/machines/${id}`, { key });
          if (r.status !== 200) throw new Error(`get ${r.status}`);
          lat.push(performance.now() - t0);
        }
      };
      const t0 = performance.now();
      await Promise.all(Array.from({ length: 16 }, worker));
      const secs = (performance.now() - t0) / 1000;
      lat.sort((a, b) => a - b);
      return { rps: lat.length / secs, lat };
    };
    const all = await throughput(3000);
    line('GET /v1/machines/{id} (16 concurrent)', `${all.rps.toFixed(0)} req/s  p50 ${percentile(all.lat, 50).toFixed(2)} ms  p99 ${percentile(all.lat, 99).toFixed(2)} ms`);

    // Metering overhead: the same GET load with metering off (flush timer stopped) and on, flushing every
    // second (30x the production FLUSH_MS, so every window holds flushes), alternated to cancel drift.
    // A GET does no per-request metering work; what can cost is the flush's transaction.
    const meter = running.services.metering;
    const rounds = { off: [] as number[], on: [] as number[] };
    for (let r = 0; r < 3; r++) {
      meter.stop();
      rounds.off.push((await throughput(2000)).rps);
      meter.start(1000);
      rounds.on.push((await throughput(2000)).rps);
    }
    meter.stop();
    meter.start();
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const off = mean(rounds.off);
    const on = mean(rounds.on);
    line('GET throughput, metering off / on (flush 1 s)', `${off.toFixed(0)} / ${on.toFixed(0)} req/s  overhead ${(((off - on) / off) * 100).toFixed(1)}% (budget 5%, 3 alternating rounds of 2 s)`);
  } finally {
    for (const m of created) await call('DELETE', `/v1/machines/${m}`, { key }).catch(() => {});
    await client.close();
    await running.close();
    await host.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export type BenchCall = (
  method: string,
  p: string,
  o?: { key?: string; cookie?: string; body?: unknown; headers?: Record<string, string> },
) => Promise<{ status: number; headers: Record<string, unknown>; json: any }>;

/** A /v1 client for a served control plane, and a subscribed organization's API key. */
export async function benchClient(base: string): Promise<{ call: BenchCall; key: string; close(): Promise<void> }> {
  const dispatcher = new Agent({ connections: 32, pipelining: 1 });
  const call = benchCaller(base, dispatcher);
  const su = await call('POST', '/v1/auth/signup', { body: { email: 'bench@example.com', password: 'bench password 123' } });
  const cookie = `computer_session=${/computer_session=([^;]+)/.exec(String(su.headers['set-cookie']))![1]}`;
  const co = await call('POST', '/v1/billing/checkout', { cookie, body: { plan_id: 'pro', success_url: `${base}/` } });
  await call('GET', new URL(co.json.url).pathname);
  const key = (await call('POST', '/v1/api-keys', { cookie, body: { name: 'bench', scopes: ['machines:read', 'machines:write', 'machines:control', 'sessions:write'] } })).json.secret as string;
  return { call, key, close: () => dispatcher.close() };
}

/** /v1 calls to `base` over `dispatcher` (keep-alive). */
export function benchCaller(base: string, dispatcher: Agent): BenchCall {
  return async (method, p, o2 = {}) => {
    const headers: Record<string, string> = { ...o2.headers };
    if (o2.key) headers.authorization = `Bearer ${o2.key}`;
    if (o2.cookie) {
      headers.cookie = o2.cookie;
      headers.origin = base;
    }
    if (o2.body !== undefined) headers['content-type'] = 'application/json';
    const r = await undiciRequest(`${base}${p}`, { method: method as 'GET', headers, body: o2.body === undefined ? undefined : JSON.stringify(o2.body), dispatcher });
    const text = await r.body.text();
    return { status: r.statusCode, headers: r.headers, json: text ? (JSON.parse(text) as any) : undefined };
  };
}

/** Bench only: read the machine's agent token from the store to time the agent-side floor. */
async function tokenOf(dataDir: string, id: string): Promise<string> {
  const { openDb, DB_FILENAME } = await import('../../control-plane/src/store/db.js');
  const db = openDb(path.join(dataDir, DB_FILENAME));
  try {
    return (await db.q().selectFrom('machines').select('agent_token').where('id', '=', id).executeTakeFirstOrThrow()).agent_token;
  } finally {
    await db.close();
  }
}

runAlone(import.meta.url, () => benchApi({ substrate: process.argv[2] === 'container' ? 'container' : 'host' }));

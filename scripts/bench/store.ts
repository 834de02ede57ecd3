/**
 * Store benchmark (issue 24, `BENCH=store`): the same control plane, `serve()` with the fake substrate (the real
 * agent app behind its channel, no guest), run once on SQLite in a temp DATA_DIR and once on a throwaway
 * PostgreSQL cluster (scripts/lib/throwaway-postgres.ts), so the figures isolate the control plane + store.
 * Two rounds, the engine order alternated, printed side by side (60 creates a round, so its p50 is less noisy):
 *   GET /v1/machines/{id} req/s and p50/p99 (16 concurrent, as in api.ts), machine create → running p50/p99 and
 *   the PostgreSQL − SQLite difference of its p50 (target ≤ +10 ms), and a write-heavy figure: the
 *   POST …/stop + POST …/start round trip.
 * Skipped, with a line saying so, when PostgreSQL is not installed.
 * Run alone: `node dist/scripts/bench/store.js`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { createAgentApp } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { Enrollment } from '../../agent/src/enrollment.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { PG_BIN, startPostgres } from '../lib/throwaway-postgres.js';
import { benchClient, serveForBench, type BenchCall } from './api.js';
import { line, percentile } from './stats.js';
import { runAlone } from './run-alone.js';

type Engine = 'sqlite' | 'postgres';

interface Figures {
  rps: number;
  getP50: number;
  getP99: number;
  createP50: number;
  createP99: number;
  cycleP50: number;
  cycleP99: number;
}

const CREATES = 60;
const CYCLES = 20;
const CONCURRENCY = 16;
const GET_MS = 3000;

/** The fake substrate with the real agent app (no desktop mount) serving each machine's channel. */
function agentSubstrate(): { substrate: FakeSubstrate; close(): void } {
  const servers = new Map<string, ReturnType<typeof createAgentServer>>();
  const substrate = new FakeSubstrate({
    channelHandler: (id: string, end: Duplex) => {
      let s = servers.get(id);
      if (!s) {
        s = createAgentServer(createAgentApp({ enrollment: new Enrollment({ kind: 'channel' }), log: () => {}, mounts: [] }), () => {});
        servers.set(id, s);
      }
      s.emit('connection', end);
    },
  });
  return { substrate, close: () => servers.forEach((s) => s.close()) };
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

async function timed(fn: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function waitState(call: BenchCall, key: string, id: string, state: string): Promise<void> {
  for (;;) {
    const r = await call('GET', `/v1/machines/${id}`, { key });
    if (r.json?.state === state) return;
    await new Promise((res) => setTimeout(res, 5));
  }
}

function expect(r: { status: number; json: unknown }, ok: number[], what: string): void {
  if (!ok.includes(r.status)) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.json)}`);
}

async function measureEngine(engine: Engine, databaseUrl: string | null): Promise<Figures> {
  const host = agentSubstrate();
  const env: Record<string, string> = { WARM_POOL_PER_SIZE: '0' };
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  const { running, dataDir } = await serveForBench(host.substrate, env);
  const client = await benchClient(running.url);
  const { call, key } = client;
  try {
    // create → running: POST /v1/machines until the machine reads `running` (deleted after, so counts stay flat).
    const creates: number[] = [];
    for (let i = 0; i < CREATES + 2; i++) {
      let id = '';
      const ms = await timed(async () => {
        const m = await call('POST', '/v1/machines', { key, body: {} });
        expect(m, [201], `${engine} create`);
        id = m.json.id;
        if (m.json.state !== 'running') await waitState(call, key, id, 'running');
      });
      if (i >= 2) creates.push(ms);
      expect(await call('DELETE', `/v1/machines/${id}`, { key }), [200, 202, 204], `${engine} delete`);
    }
    const m = await call('POST', '/v1/machines', { key, body: {} });
    expect(m, [201], `${engine} create`);
    const id = m.json.id as string;
    await waitState(call, key, id, 'running');

    // Write-heavy: stop then start, each until the machine reads the settled state.
    const cycles: number[] = [];
    for (let i = 0; i < CYCLES + 2; i++) {
      const ms = await timed(async () => {
        expect(await call('POST', `/v1/machines/${id}/stop`, { key }), [200, 202], `${engine} stop`);
        await waitState(call, key, id, 'stopped');
        expect(await call('POST', `/v1/machines/${id}/start`, { key }), [200, 202], `${engine} start`);
        await waitState(call, key, id, 'running');
      });
      if (i >= 2) cycles.push(ms);
    }

    // GET throughput: CONCURRENCY clients for GET_MS.
    const lat: number[] = [];
    const until = performance.now() + GET_MS;
    const worker = async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        expect(await call('GET', `/v1/machines/${id}`, { key }), [200], `${engine} get`);
        lat.push(performance.now() - t0);
      }
    };
    const secs = (await timed(() => Promise.all(Array.from({ length: CONCURRENCY }, worker)).then(() => undefined))) / 1000;
    const g = sorted(lat);
    const c = sorted(creates);
    const y = sorted(cycles);
    await call('DELETE', `/v1/machines/${id}`, { key });
    return {
      rps: lat.length / secs,
      getP50: percentile(g, 50),
      getP99: percentile(g, 99),
      createP50: percentile(c, 50),
      createP99: percentile(c, 99),
      cycleP50: percentile(y, 50),
      cycleP99: percentile(y, 99),
    };
  } finally {
    await client.close();
    await running.close();
    host.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

function print(round: number, order: Engine[], f: Record<Engine, Figures>): void {
  const pair = (get: (x: Figures) => string) => `SQLite ${get(f.sqlite)}  |  PostgreSQL ${get(f.postgres)}`;
  console.log(`# round ${round} (order: ${order.join(' then ')})`);
  line(`GET /v1/machines/{id} (${CONCURRENCY} concurrent)`, pair((x) => `${x.rps.toFixed(0)} req/s p50 ${x.getP50.toFixed(2)} p99 ${x.getP99.toFixed(2)} ms`));
  line('create → running', pair((x) => `p50 ${x.createP50.toFixed(1)} p99 ${x.createP99.toFixed(1)} ms`) + `  (n=${CREATES})`);
  const d = f.postgres.createP50 - f.sqlite.createP50;
  line('create → running p50, PostgreSQL − SQLite', `${d >= 0 ? '+' : ''}${d.toFixed(1)} ms (target ≤ +10 ms)`);
  line('stop + start round trip', pair((x) => `p50 ${x.cycleP50.toFixed(1)} p99 ${x.cycleP99.toFixed(1)} ms`) + `  (n=${CYCLES})`);
}

export async function benchStore(): Promise<void> {
  if (!fs.existsSync(path.join(PG_BIN, 'initdb'))) {
    console.log(`# store: skipped, PostgreSQL is not installed (no ${PG_BIN}/initdb; scripts/setup-host.sh --test installs it)`);
    return;
  }
  const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
  console.log(`# Store: SQLite vs PostgreSQL through /v1 (fake substrate: control plane + store only), ${os.cpus().length} cores, load ${load}`);
  const pg = await startPostgres();
  try {
    for (let round = 1; round <= 2; round++) {
      const order: Engine[] = round % 2 ? ['sqlite', 'postgres'] : ['postgres', 'sqlite'];
      const f = {} as Record<Engine, Figures>;
      for (const engine of order) {
        f[engine] = await measureEngine(engine, engine === 'postgres' ? await pg.createDatabase(`bench_${round}`) : null);
      }
      print(round, order, f);
    }
  } finally {
    await pg.stop();
  }
}

runAlone(import.meta.url, benchStore);

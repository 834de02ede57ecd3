/**
 * Cross-host request overhead (the `crosshost` part of `npm run bench`; issue 25 item 3, docs/cluster.md
 * "Measured"): two `serve()` control planes on one throwaway PostgreSQL and ONE DATA_DIR, so one host: A, in this
 * process (the real container substrate), drives it; B, a child process with its own event loop as in a real
 * deployment (cross-host-follower.ts, started after A drives, with a substrate it never uses), forwards every
 * machine route to A over the internal channel. One small machine running; a JPEG screenshot and a pointer move sent
 * to A directly and to B (forwarded), interleaved (direct and forwarded alternate, so drift hits both), N each.
 * Prints p50/p99 and the overhead (target ≤ +2 ms p50). Run alone: `node dist/scripts/bench/cross-host.js`;
 * `CROSSHOST_NODE_ARGS='--cpu-prof --cpu-prof-dir=DIR'` starts B with those node flags (its profile at its exit).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Agent } from 'undici';
import { findRepoRoot } from '../../control-plane/src/machine-host.js';
import { startPostgres } from '../lib/throwaway-postgres.js';
import { benchCaller, benchClient, containerHost, type BenchCall } from './api.js';
import { serveOn } from './cross-host-serve.js';
import { line, percentile } from './stats.js';
import { runAlone } from './run-alone.js';

const N = 200;
const WARMUP = 10;

/** B, the forwarding process, as a child (cross-host-follower.ts): its URL once it serves, and how to end it. */
async function startFollower(databaseUrl: string, dataDir: string): Promise<{ url: string; driving: boolean; close(): Promise<void> }> {
  const nodeArgs = (process.env.CROSSHOST_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, fileURLToPath(new URL('./cross-host-follower.js', import.meta.url)), databaseUrl, dataDir], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const first = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the follower exited (${code}) before serving`)));
  });
  const [word, url, driving] = first.split(' ');
  if (word !== 'ready' || !url) throw new Error(`the follower said ${first}`);
  return { url, driving: driving === 'true', close: async () => { child.stdin.end(); await exited; } };
}

async function timed(fn: () => Promise<{ status: number }>, ok: number): Promise<number> {
  const t0 = performance.now();
  const r = await fn();
  if (r.status !== ok) throw new Error(`answered ${r.status}`);
  return performance.now() - t0;
}

const summary = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99) };
};

function report(what: string, direct: number[], forwarded: number[]): void {
  const d = summary(direct);
  const f = summary(forwarded);
  line(`${what}, direct to the driver`, `p50 ${d.p50.toFixed(2)} ms  p99 ${d.p99.toFixed(2)} ms  (n=${direct.length})`);
  line(`${what}, through the other process`, `p50 ${f.p50.toFixed(2)} ms  p99 ${f.p99.toFixed(2)} ms  (n=${forwarded.length})`);
  line(`${what}, overhead`, `p50 ${(f.p50 - d.p50 >= 0 ? '+' : '')}${(f.p50 - d.p50).toFixed(2)} ms  p99 ${(f.p99 - d.p99 >= 0 ? '+' : '')}${(f.p99 - d.p99).toFixed(2)} ms  (target ≤ +2 ms p50)`);
}

export async function benchCrossHost(o: { repoRoot?: string } = {}): Promise<void> {
  console.log('\n== cross-host overhead: a machine route sent to its host\'s driver vs through another process (container substrate, PostgreSQL) ==');
  const pg = await startPostgres();
  const host = await containerHost(o.repoRoot ?? findRepoRoot());
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-crosshost-'));
  const a = await serveOn(dataDir, pg.url, host.substrate);
  const b = await startFollower(pg.url, dataDir);
  const client = await benchClient(a.url);
  const dispatcher = new Agent({ connections: 8, pipelining: 1 });
  const viaB: BenchCall = benchCaller(b.url, dispatcher);
  const { call: viaA, key } = client;
  let id: string | null = null;
  try {
    if (!a.driving() || b.driving) throw new Error('A must drive the host and B follow');
    const m = await viaA('POST', '/v1/machines', { key, body: {} });
    if (m.status !== 201) throw new Error(`create ${m.status} ${JSON.stringify(m.json)}`);
    id = String(m.json.id);
    while ((await viaA('GET', `/v1/machines/${id}/display`, { key })).status !== 200) await new Promise((r) => setTimeout(r, 100));
    const s = (await viaA('POST', '/v1/sessions', { key, body: { machine_id: id, type: 'agent' } })).json.id as string;
    const fence = String((await viaA('POST', `/v1/machines/${id}/input-lease`, { key, body: { session_id: s, ttl_seconds: 3600 } })).json.fence);
    const input = { 'x-session-id': s, 'x-lease-fence': fence };
    const shot = (call: BenchCall) => () => call('GET', `/v1/machines/${id}/screenshot?format=jpeg&quality=80`, { key });
    const move = (call: BenchCall, i: number) => () => call('POST', `/v1/machines/${id}/mouse/move`, { key, body: { x: 100 + (i % 50), y: 100 }, headers: input });
    const t = { shotA: [] as number[], shotB: [] as number[], moveA: [] as number[], moveB: [] as number[] };
    for (let i = 0; i < N + WARMUP; i++) {
      // Alternate which side goes first, so neither always follows the other.
      const pair = i % 2 === 0 ? [viaA, viaB] : [viaB, viaA];
      const shots = [];
      for (const c of pair) shots.push(await timed(shot(c), 200));
      const moves = [];
      for (const c of pair) moves.push(await timed(move(c, i), 200));
      if (i < WARMUP) continue;
      const [sa, sb] = i % 2 === 0 ? shots : [shots[1]!, shots[0]!];
      const [ma, mb] = i % 2 === 0 ? moves : [moves[1]!, moves[0]!];
      t.shotA.push(sa!);
      t.shotB.push(sb!);
      t.moveA.push(ma!);
      t.moveB.push(mb!);
    }
    report('screenshot JPEG q80', t.shotA, t.shotB);
    report('pointer move (lease checked)', t.moveA, t.moveB);
  } finally {
    if (id) await viaA('DELETE', `/v1/machines/${id}`, { key }).catch(() => {});
    await client.close();
    await dispatcher.close();
    await b.close();
    await a.close();
    await host.close();
    await pg.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runAlone(import.meta.url, benchCrossHost);

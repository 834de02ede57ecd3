/**
 * Cross-host request overhead (the `crosshost` part of `npm run bench`; issue 25 item 3, docs/cluster.md
 * "Measured"): two `serve()` control planes on one throwaway PostgreSQL and ONE DATA_DIR, so one host: A, in this
 * process (the real container substrate), drives it; B, a child process with its own event loop as in a real
 * deployment (cross-host-follower.ts, started after A drives, with a substrate it never uses), forwards every
 * machine route to A over the internal channel. One small machine running; a JPEG screenshot and a pointer move sent
 * to A directly and to B (forwarded), interleaved, N each, by a third process (cross-host-caller.ts): a tenant's
 * client is not part of the service, so it shares neither A's loop nor B's. The floor, in the same run: the same
 * requests through a bare Node HTTP proxy in front of A (cross-host-proxy.ts), a child as B is, which does nothing a
 * forward must (authenticate, sign, verify, strip). Prints p50/p99 and the overhead of each (target ≤ +2 ms p50).
 * Run alone: `node dist/scripts/bench/cross-host.js`; `CROSSHOST_NODE_ARGS='--cpu-prof --cpu-prof-dir=DIR'` starts B
 * with those node flags (its profile at its exit).
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { findRepoRoot } from '../../control-plane/src/machine-host.js';
import { startPostgres } from '../lib/throwaway-postgres.js';
import { benchClient, containerHost } from './api.js';
import { CallerTimes, type CallerPlan } from './cross-host-caller.js';
import { serveOn } from './cross-host-serve.js';
import { line, percentile } from './stats.js';
import { runAlone } from './run-alone.js';

const N = 200;
const WARMUP = 10;

/** A child running `script` (a sibling of this file) with `nodeArgs`: its first line on stdout, and how to end it. */
function startChild(script: string, args: string[], nodeArgs: string[] = []) {
  const child: ChildProcessByStdio<Writable, Readable, null> = spawn(process.execPath, [...nodeArgs, fileURLToPath(new URL(script, import.meta.url)), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const first = new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before it answered`)));
  });
  return { child, first, close: async () => { child.stdin.end(); await exited; } };
}

/** B, the forwarding process, as a child (cross-host-follower.ts): its URL once it serves, and how to end it. */
async function startFollower(databaseUrl: string, dataDir: string): Promise<{ url: string; driving: boolean; close(): Promise<void> }> {
  const nodeArgs = (process.env.CROSSHOST_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const c = startChild('./cross-host-follower.js', [databaseUrl, dataDir], nodeArgs);
  const first = await c.first;
  const [word, url, driving] = first.split(' ');
  if (word !== 'ready' || !url) throw new Error(`the follower said ${first}`);
  return { url, driving: driving === 'true', close: c.close };
}

/** The bare proxy in front of `a` (cross-host-proxy.ts), as a child: its URL, and how to end it. */
async function startProxy(a: string): Promise<{ url: string; close(): Promise<void> }> {
  const c = startChild('./cross-host-proxy.js', [a]);
  const first = await c.first;
  const [word, url] = first.split(' ');
  if (word !== 'ready' || !url) throw new Error(`the proxy said ${first}`);
  return { url, close: c.close };
}

/** The caller (cross-host-caller.ts) run once over `plan`, in its own process: its times. */
async function callFromOwnProcess(plan: CallerPlan): Promise<CallerTimes> {
  const c = startChild('./cross-host-caller.js', []);
  c.child.stdin.write(`${JSON.stringify(plan)}\n`);
  try {
    return CallerTimes.parse(JSON.parse(await c.first));
  } finally {
    await c.close();
  }
}

const summary = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99) };
};

const signed = (ms: number) => `${ms >= 0 ? '+' : ''}${ms.toFixed(2)}`;

function report(what: string, direct: number[], forwarded: number[], proxied: number[]): void {
  const d = summary(direct);
  const f = summary(forwarded);
  const p = summary(proxied);
  line(`${what}, direct to the driver`, `p50 ${d.p50.toFixed(2)} ms  p99 ${d.p99.toFixed(2)} ms  (n=${direct.length})`);
  line(`${what}, through the other process`, `p50 ${f.p50.toFixed(2)} ms  p99 ${f.p99.toFixed(2)} ms  (n=${forwarded.length})`);
  line(`${what}, through a bare proxy (floor)`, `p50 ${p.p50.toFixed(2)} ms  p99 ${p.p99.toFixed(2)} ms  (n=${proxied.length})`);
  line(`${what}, overhead`, `p50 ${signed(f.p50 - d.p50)} ms  p99 ${signed(f.p99 - d.p99)} ms  (target ≤ +2 ms p50)`);
  line(`${what}, a bare hop's overhead (floor)`, `p50 ${signed(p.p50 - d.p50)} ms  p99 ${signed(p.p99 - d.p99)} ms`);
}

export async function benchCrossHost(o: { repoRoot?: string } = {}): Promise<void> {
  console.log('\n== cross-host overhead: a machine route sent to its host\'s driver vs through another process (container substrate, PostgreSQL) ==');
  const pg = await startPostgres();
  const host = await containerHost(o.repoRoot ?? findRepoRoot());
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-crosshost-'));
  const a = await serveOn(dataDir, pg.url, host.substrate);
  const b = await startFollower(pg.url, dataDir);
  const proxy = await startProxy(a.url);
  const client = await benchClient(a.url);
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
    const t = await callFromOwnProcess({ a: a.url, b: b.url, p: proxy.url, key, machineId: id, sessionId: s, fence, n: N, warmup: WARMUP });
    report('screenshot JPEG q80', t.shotA, t.shotB, t.shotP);
    report('pointer move (lease checked)', t.moveA, t.moveB, t.moveP);
  } finally {
    if (id) await viaA('DELETE', `/v1/machines/${id}`, { key }).catch(() => {});
    await client.close();
    await proxy.close();
    await b.close();
    await a.close();
    await host.close();
    await pg.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

runAlone(import.meta.url, benchCrossHost);

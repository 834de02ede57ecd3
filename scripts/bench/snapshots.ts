/**
 * Snapshot benchmarks (the `snapshots` part of `npm run bench`), through /v1 in process (the real app, services
 * and SQLite; requests via app.request, no TCP) on the container substrate with the real guest image:
 *   POST /v1/snapshots?wait=true (pending → ready) with 10 MB and 1 GB written since the last capture, next to
 *   its floor in the same run (Substrate.capture alone on the same machine and the same amount written);
 *   fork → display up and create from a template → display up, next to their floor (create from the base image
 *   → display up, same run).
 * Targets (container): capture ≤ 100 ms at any size; fork and template create → display up ≤ 500 ms.
 * Run alone: `BENCH=snapshots npm run bench`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApp } from '../../control-plane/src/app.js';
import { ALL_OPS } from '../../control-plane/src/api/v1/index.js';
import { parseConfig } from '../../control-plane/src/config.js';
import { createServices } from '../../control-plane/src/services/index.js';
import { DB_FILENAME, openDb } from '../../control-plane/src/store/db.js';
import { createStore } from '../../control-plane/src/store/store.js';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { defaultImageCacheDir, ensureImage } from '../../control-plane/src/substrate/image.js';
import { percentile } from './stats.js';

const BASE = 'http://bench.local';
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const f = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `p50 ${percentile(s, 50).toFixed(0)} ms (min ${s[0]!.toFixed(0)}, n=${s.length})`;
};

export async function benchSnapshots(opts: { repoRoot: string; samples?: number; print?: (l: string) => void }): Promise<void> {
  const print = opts.print ?? ((l: string) => console.log(l));
  const samples = opts.samples ?? 3;
  const image = await ensureImage({ repoRoot: opts.repoRoot, cacheDir: defaultImageCacheDir(), artifacts: 'container', log: print });
  const root = fs.mkdtempSync('/tmp/bench-snp-');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-snp-db-'));
  const substrate = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, warn: print });
  const db = openDb(path.join(dataDir, DB_FILENAME));
  const services = await createServices({ config: parseConfig({ PUBLIC_BASE_URL: BASE, DATA_DIR: dataDir }), store: createStore(db), substrate, passwordCost: { N: 1024, r: 8, p: 1 } });
  const app = createApp({ services, log: () => {}, ops: ALL_OPS });
  const call = async (method: string, p: string, o: { key?: string; cookie?: string; body?: unknown } = {}) => {
    const headers: Record<string, string> = {};
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.cookie) headers.cookie = o.cookie;
    if (o.cookie && method !== 'GET') headers.origin = BASE;
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const r = await app.request(p, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) }, { clientIp: '192.0.2.9' });
    const text = await r.text();
    return { status: r.status, json: text ? JSON.parse(text) : undefined, headers: r.headers };
  };
  const ok = <T extends { status: number }>(r: T, want: number, what: string): T => {
    if (r.status !== want) throw new Error(`${what}: ${r.status} ${JSON.stringify((r as unknown as { json: unknown }).json)}`);
    return r;
  };
  const machines: string[] = [];
  try {
    print(`snapshots: container disk mode ${substrate.diskMode}`);
    const su = ok(await call('POST', '/v1/auth/signup', { body: { email: `bench-${Date.now()}@example.com`, password: 'correct horse battery' } }), 201, 'signup');
    const cookie = `computer_session=${/computer_session=([^;]+)/.exec(su.headers.get('set-cookie') ?? '')![1]}`;
    const co = ok(await call('POST', '/v1/billing/checkout', { cookie, body: { plan_id: 'startup', success_url: `${BASE}/` } }), 200, 'checkout');
    await call('GET', new URL(co.json.url).pathname);
    const scopes = ['machines:read', 'machines:write', 'machines:control', 'snapshots:read', 'snapshots:write', 'templates:read', 'templates:write'];
    const key = ok(await call('POST', '/v1/api-keys', { cookie, body: { name: 'bench', scopes } }), 201, 'key').json.secret as string;
    const displayUp = async (id: string) => {
      for (let i = 0; i < 3000; i++) {
        if ((await call('GET', `/v1/machines/${id}/display`, { key })).status === 200) return;
        await new Promise((r) => setTimeout(r, 5));
      }
      throw new Error('display never came up');
    };
    const exec = async (id: string, script: string) => ok(await call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', script], timeout_ms: 600_000 } }), 200, 'exec');
    const remove = async (id: string) => {
      await call('DELETE', `/v1/machines/${id}`, { key });
      machines.splice(machines.indexOf(id), 1);
    };

    const src = ok(await call('POST', '/v1/machines', { key, body: {} }), 201, 'create').json.id as string;
    machines.push(src);
    await displayUp(src);

    for (const mb of [10, 1024]) {
      const api: number[] = [];
      const floor: number[] = [];
      let bytes = 0;
      for (let i = 0; i < samples; i++) {
        await exec(src, `dd if=/dev/urandom of=/home/agent/bench-a-${i} bs=1M count=${mb} status=none && sync`);
        let t0 = process.hrtime.bigint();
        const s = ok(await call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: src } }), 201, 'snapshot').json;
        api.push(ms(t0));
        bytes = s.size_bytes;
        await exec(src, `dd if=/dev/urandom of=/home/agent/bench-b-${i} bs=1M count=${mb} status=none && sync`);
        t0 = process.hrtime.bigint();
        const cap = await substrate.capture(src, `bench-floor-${mb}-${i}`);
        floor.push(ms(t0));
        await substrate.releaseLayer(cap.layerId, `bench-floor-${mb}-${i}`);
      }
      print(`snapshots: POST /v1/snapshots?wait=true (pending → ready), ${mb >= 1024 ? '1 GB' : `${mb} MB`} written: ${f(api)}; floor Substrate.capture ${f(floor)} (layer ${(bytes / 1024 / 1024).toFixed(0)} MiB)`);
    }
    // The gigabytes just written churn the page cache: the three boots below are interleaved per round so the
    // floor (create from the base image) runs under the same conditions as fork and template create.
    await exec(src, 'rm -f /home/agent/bench-* && sync');
    const snapId = ok(await call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: src } }), 201, 'snapshot').json.id as string;
    const tpl = ok(await call('POST', '/v1/templates?wait=true', { key, body: { name: 'bench', snapshot_id: snapId } }), 201, 'template').json.id as string;
    const boot = async (p: string, body: object): Promise<number> => {
      const t0 = process.hrtime.bigint();
      const m = ok(await call('POST', p, { key, body }), 201, p).json;
      machines.push(m.id);
      await displayUp(m.id);
      const took = ms(t0);
      await remove(m.id);
      return took;
    };
    const create: number[] = [];
    const fork: number[] = [];
    const fromTpl: number[] = [];
    for (let i = 0; i < samples + 1; i++) {
      const c = await boot('/v1/machines', {});
      const fk = await boot(`/v1/machines/${src}/fork`, { snapshot_id: snapId });
      const tp = await boot('/v1/machines', { template: tpl });
      // The first round warms the caches up.
      if (i === 0) continue;
      create.push(c);
      fork.push(fk);
      fromTpl.push(tp);
    }
    print(`snapshots: fork → display up ${f(fork)}; create from template → display up ${f(fromTpl)}; floor create (base image) → display up ${f(create)}`);
  } finally {
    for (const id of machines) await substrate.destroy(id).catch(() => {});
    await services.pool.close();
    await db.close();
    await substrate.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (substrate.env.runDir) fs.rmSync(substrate.env.runDir, { recursive: true, force: true });
  }
}

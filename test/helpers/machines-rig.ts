/**
 * Machines API rig: the real app (every /v1 operation) and services over a real SQLite file, with a
 * given substrate (FakeSubstrate for unit tests, ContainerSubstrate end to end), and helpers to get a
 * subscribed organization with API keys.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApp } from '../../control-plane/src/app.js';
import { ALL_OPS } from '../../control-plane/src/api/v1/index.js';
import { parseConfig } from '../../control-plane/src/config.js';
import type { LogLine } from '../../control-plane/src/log.js';
import { createServices, type ServiceDeps } from '../../control-plane/src/services/index.js';
import { openRigDb, rigDatabaseEnv } from './rig-db.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import { createStore } from '../../control-plane/src/store/store.js';
import type { Substrate } from '../../control-plane/src/substrate/substrate.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL, PUBLIC_ORIGIN, type CallOpts, type Reply } from './control-plane.js';

export interface MachinesRigOptions {
  substrate: Substrate;
  services?: Partial<ServiceDeps>;
  /** Reuse a data directory (control-plane restart). */
  dir?: string;
  /** Extra configuration variables (e.g. PREVIEW_DOMAIN). */
  env?: Record<string, string>;
  /** A dashboard build to serve at `/` (test/helpers/dashboard.ts). */
  dashboardDir?: string;
  /** A PostgreSQL database another rig shares (two processes of one deployment); default: the rig's own. */
  databaseUrl?: string;
}

export async function makeMachinesRig(o: MachinesRigOptions) {
  const dir = o.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'cp-mch-'));
  // PUBLIC_BASE_URL is not loopback, so previews are named explicitly: on localhost, as `npm start` serves them.
  // No warm pool unless a test asks for one (WARM_POOL_PER_SIZE in `env`): machines appear only where a test made them.
  const dbEnv = o.databaseUrl ? { DATABASE_URL: o.databaseUrl } : await rigDatabaseEnv(dir);
  const config = parseConfig({ PUBLIC_BASE_URL, DATA_DIR: dir, PREVIEW_DOMAIN: 'localhost', WARM_POOL_PER_SIZE: '0', ...dbEnv, ...o.env });
  const db = o.databaseUrl ? await openStoreDb({ databaseUrl: o.databaseUrl, dataDir: dir }) : await openRigDb(dir);
  const store = createStore(db);
  const clock = { t: Date.parse('2026-11-22T06:00:00.000Z'), real: true };
  const now = () => (clock.real ? new Date() : new Date(clock.t));
  const failures: string[] = [];
  const services = await createServices({
    // A host large enough that only tests about admission control (which pin their own) meet it.
    passwordCost: FAST_SCRYPT, now, substrate: o.substrate, hostResources: { memory_mb: 64 * 1024 * 1024, vcpu: 64 * 1024 },
    onMachineFailure: (id, op) => failures.push(`${op}:${id}`),
    ...o.services, config, store,
  });
  const logs: LogLine[] = [];
  const app = createApp({ services, log: (l) => logs.push(l), checkResponses: true, ops: ALL_OPS, dashboardDir: o.dashboardDir });
  /** Every response body, for scanning for leaks. */
  const bodies: string[] = [];

  async function call(method: string, p: string, co: CallOpts = {}): Promise<Reply> {
    const headers: Record<string, string> = { ...co.headers };
    if (co.cookie) headers.cookie = co.cookie;
    if (co.key) headers.authorization = `Bearer ${co.key}`;
    const write = method !== 'GET' && method !== 'HEAD';
    const origin = co.origin === undefined ? (co.cookie && write ? PUBLIC_ORIGIN : undefined) : co.origin ?? undefined;
    if (origin) headers.origin = origin;
    let body: string | undefined;
    if (co.rawBody !== undefined) body = co.rawBody;
    else if (co.body !== undefined) body = JSON.stringify(co.body);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await app.request(p, { method, headers, body }, { clientIp: co.ip ?? '192.0.2.1' });
    const text = await res.text();
    bodies.push(text);
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  let n = 0;
  /**
   * A new user whose personal organization is subscribed to `plan`, with an API key of `scopes`. With plan
   * `none` the organization stays unsubscribed and has no key (it may create none): use its cookie.
   */
  async function tenant(plan: 'none'): Promise<{ cookie: string; orgId: string; userId: string }>;
  async function tenant(plan?: string, scopes?: string[]): Promise<{ cookie: string; orgId: string; userId: string; key: string; keyId: string }>;
  async function tenant(plan = 'pro', scopes: string[] = ['machines:read', 'machines:write', 'machines:control', 'sessions:write']) {
    const email = `m${++n}-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const su = await call('POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery', name: 'm' }, ip: `203.0.113.${n % 250}` });
    if (su.status !== 201) throw new Error(`signup ${su.status} ${su.text}`);
    // `computer_session`, or `__Host-computer_session` under an https PUBLIC_BASE_URL.
    const cookie = /^[^;]+/.exec(su.headers.get('set-cookie') ?? '')![0];
    const orgId = su.json.organization_id as string;
    if (plan !== 'none') {
      const co = await call('POST', '/v1/billing/checkout', { cookie, body: { plan_id: plan, success_url: `${PUBLIC_ORIGIN}/ok` } });
      if (co.status !== 200) throw new Error(`checkout ${co.status} ${co.text}`);
      const done = await call('GET', new URL(co.json.url).pathname);
      if (done.status !== 303) throw new Error(`checkout complete ${done.status}`);
    }
    if (plan === 'none') return { cookie, orgId, userId: su.json.user_id as string };
    const k = await call('POST', '/v1/api-keys', { cookie, body: { name: 'k', scopes } });
    if (k.status !== 201) throw new Error(`key ${k.status} ${k.text}`);
    return { cookie, orgId, userId: su.json.user_id as string, key: k.json.secret as string, keyId: k.json.id as string };
  }

  /** A second key in the same organization. */
  async function key(cookie: string, scopes: string[]): Promise<{ key: string; keyId: string }> {
    const k = await call('POST', '/v1/api-keys', { cookie, body: { name: 'k2', scopes } });
    if (k.status !== 201) throw new Error(`key ${k.status} ${k.text}`);
    return { key: k.json.secret, keyId: k.json.id };
  }

  return {
    dir, config, store, services, app, logs, bodies, failures, clock, call, tenant, key,
    async close(opts: { keepDir?: boolean } = {}) {
      await services.machines.warmPool.drain();
      await services.pool.close();
      await db.close();
      if (!opts.keepDir) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
export type MachinesRig = Awaited<ReturnType<typeof makeMachinesRig>>;

/** Polls `fn` every half second until it returns non-null. */
export async function until<T>(what: string, tries: number, fn: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** Waits for GET /display to answer 200 (503 while the desktop is coming up). */
export async function displayUp(rig: MachinesRig, key: string, id: string, tries = 240): Promise<any> {
  return until('the desktop', tries, async () => {
    const r = await rig.call('GET', `/v1/machines/${id}/display`, { key });
    if (r.status === 200) return r.json;
    if (r.status !== 503) throw new Error(`display: ${r.status} ${r.text}`);
    return null;
  });
}

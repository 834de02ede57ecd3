/**
 * Real control-plane processes (served-child.ts: `serve()` with the fake substrate) for the cross-process guarantees
 * of issue 24 item 2. On PostgreSQL: two processes on one throwaway cluster (helpers/postgres.ts), the same
 * DATABASE_URL. On SQLite: one process on its DATA_DIR (the embedded engine serves one process). Requests go over
 * real HTTP on loopback, alternating between the processes so that concurrent calls are split across them.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import type { HostShape } from '../../control-plane/src/domain/host-capacity.js';
import type { StripeClientOptions } from '../../control-plane/src/billing/stripe.js';
import { holdWrites, type Hold } from './pg-hold.js';
import { childGroup, type ChildLine, type PgChild } from './pg-processes.js';
import { startPostgres } from './postgres.js';
import { PUBLIC_ORIGIN } from './control-plane.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'served-child.ts');

export type Engine = 'sqlite' | 'postgres';

export interface HttpReply {
  status: number;
  json: any;
  /** The `name=value` of a Set-Cookie, if any. */
  cookie: string | null;
  /** The answer's x-request-id. */
  requestId: string | null;
}

export interface Served {
  /** The DATABASE_URL both processes share (PostgreSQL), null on SQLite. */
  url: string | null;
  /** Each process's base URL (two on PostgreSQL, one on SQLite). */
  bases: string[];
  /** The processes, in the order of `bases`, and the line each printed when ready (`driving`, `internal`). */
  children: PgChild[];
  ready: ChildLine[];
  /** The base URL of call number `i` (round robin over the processes). */
  base(i: number): string;
  call(base: string, method: string, p: string, o?: { key?: string; cookie?: string; body?: unknown; ip?: string; headers?: Record<string, string> }): Promise<HttpReply>;
  /** A new user whose personal organization is subscribed to `plan`, with a full-scope API key. */
  tenant(plan: string): Promise<{ cookie: string; orgId: string; key: string }>;
}

/** One host of `startServed`'s `hosts`: a process on its own DATA_DIR, registering this shape and region. */
export interface ServedHost {
  shape: HostShape;
  /** REGION (default `default`). */
  region?: string;
}

/**
 * `hostShape`: the shape the processes' host registers (served-child.ts; default: so large only quotas refuse);
 * `requests`: each child prints its request log lines; `env`: settings every process adds (served-child.ts);
 * `stripeClient`: the Stripe API they talk to (helpers/fake-stripe.ts); `hosts` (PostgreSQL): instead of two processes on one
 * DATA_DIR, one process per entry, each on its own DATA_DIR, so each is a host of its own, started in order.
 */
export async function startServed(t: Test, engine: Engine, o: { hostShape?: HostShape; requests?: boolean; hosts?: ServedHost[]; env?: Record<string, string>; stripeClient?: StripeClientOptions } = {}): Promise<Served> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-guarantees-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let url: string | undefined;
  if (engine === 'postgres') {
    const pg = await startPostgres();
    t.teardown(pg.stop);
    url = pg.url;
  }
  const start = childGroup(t, { dataDir, ...(url ? { url } : {}), ...(o.hostShape ? { hostShape: o.hostShape } : {}), ...(o.env ? { env: o.env } : {}), ...(o.stripeClient ? { stripeClient: o.stripeClient } : {}) }, CHILD);
  const bases: string[] = [];
  const children: PgChild[] = [];
  const ready: ChildLine[] = [];
  // One after the other: the first migrates the database, the second opens it migrated.
  const own = (h: ServedHost) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-host-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    return { dataDir: dir, hostShape: h.shape, ...(h.region ? { region: h.region } : {}) };
  };
  const each: Array<Record<string, unknown>> = engine === 'postgres' ? (o.hosts?.map(own) ?? [{}, {}]) : [{}];
  for (const [i, args] of each.entries()) {
    const c = start('abcdefgh'[i]!, { ...args, ...(o.requests ? { requests: true } : {}) });
    const line = await c.next((l) => l.ready === true);
    bases.push(String(line.base));
    children.push(c);
    ready.push(line);
  }
  let n = 0;
  return {
    url: url ?? null,
    bases,
    children,
    ready,
    base: (i) => bases[i % bases.length]!,
    call: callServed,
    tenant: (plan) => tenantVia(bases[0]!, plan, ++n),
  };
}

/** One call over real HTTP to a served process at `base` (from 192.0.2.1 unless `ip`). */
export const callServed: Served['call'] = async (base, method, p, o = {}) => {
  const headers: Record<string, string> = { 'x-forwarded-for': o.ip ?? '192.0.2.1', ...o.headers };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.cookie) headers.cookie = o.cookie;
  if (o.cookie && method !== 'GET') headers.origin = PUBLIC_ORIGIN;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + p, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body), redirect: 'manual' });
  const text = await res.text();
  return {
    status: res.status,
    json: text.startsWith('{') ? JSON.parse(text) : text,
    cookie: /^[^;]+/.exec(res.headers.get('set-cookie') ?? '')?.[0] ?? null,
    requestId: res.headers.get('x-request-id'),
  };
};

/** Tenant number `n` (unique per test process), signed up through `b` (password `correct horse battery`): Served['tenant']. */
export async function tenantVia(b: string, plan: string, n: number): Promise<{ email: string; cookie: string; orgId: string; key: string }> {
  const call = callServed;
  const email = `q${n}-${process.pid}@example.com`;
  const su = await call(b, 'POST', '/v1/auth/signup', { body: { email, password: 'correct horse battery', name: 'q' }, ip: `203.0.113.${n}` });
  if (su.status !== 201) throw new Error(`signup ${su.status} ${JSON.stringify(su.json)}`);
  const cookie = su.cookie!;
  const orgId = su.json.organization_id as string;
  const co = await call(b, 'POST', '/v1/billing/checkout', { cookie, body: { plan_id: plan, success_url: `${PUBLIC_ORIGIN}/ok` } });
  if (co.status !== 200) throw new Error(`checkout ${co.status} ${JSON.stringify(co.json)}`);
  const done = await call(b, 'GET', new URL(co.json.url as string).pathname);
  if (done.status !== 303) throw new Error(`checkout complete ${done.status}`);
  const k = await call(b, 'POST', '/v1/api-keys', { cookie, body: { name: 'k', scopes: ['machines:read', 'machines:write', 'machines:control', 'sessions:write'] } });
  if (k.status !== 201) throw new Error(`key ${k.status} ${JSON.stringify(k.json)}`);
  return { email, cookie, orgId, key: k.json.secret as string };
}

/**
 * Runs `n` calls at once (round robin over the processes). On PostgreSQL `table`'s writes are held (pg-hold.ts) until
 * all `n` wait on a lock, so that every call has read before any writes unless something serializes them.
 */
export async function race(s: Served, table: string, n: number, one: (base: string, i: number) => Promise<HttpReply>): Promise<HttpReply[]> {
  const hold: Hold | null = s.url ? await holdWrites(s.url, table) : null;
  const replies = Promise.all(Array.from({ length: n }, (_, i) => one(s.base(i), i)));
  if (hold) {
    await hold.waiting(n);
    await hold.release();
  }
  return replies;
}


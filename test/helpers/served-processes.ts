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
import type { StripeClientOptions } from '../../control-plane/src/billing/stripe.js';
import { holdWrites, type Hold } from './pg-hold.js';
import { childGroup } from './pg-processes.js';
import { startPostgres } from './postgres.js';
import { PUBLIC_ORIGIN } from './control-plane.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'served-child.ts');

export type Engine = 'sqlite' | 'postgres';

export interface HttpReply {
  status: number;
  json: any;
  /** The `name=value` of a Set-Cookie, if any. */
  cookie: string | null;
}

export interface Served {
  /** The DATABASE_URL both processes share (PostgreSQL), null on SQLite. */
  url: string | null;
  /** Each process's base URL (two on PostgreSQL, one on SQLite). */
  bases: string[];
  /** The base URL of call number `i` (round robin over the processes). */
  base(i: number): string;
  call(base: string, method: string, p: string, o?: { key?: string; cookie?: string; body?: unknown; ip?: string; headers?: Record<string, string> }): Promise<HttpReply>;
  /** A new user whose personal organization is subscribed to `plan`, with a full-scope API key. */
  tenant(plan: string): Promise<{ cookie: string; orgId: string; key: string }>;
}

/**
 * `hostId`: both processes drive that host (its registration is the test's: store/repos/hosts.ts `takeOver`); `env`:
 * settings both processes add (served-child.ts); `stripeClient`: the Stripe API both talk to (helpers/fake-stripe.ts).
 */
export async function startServed(
  t: Test,
  engine: Engine,
  o: { hostId?: string; env?: Record<string, string>; stripeClient?: StripeClientOptions } = {},
): Promise<Served> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-guarantees-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let url: string | undefined;
  if (engine === 'postgres') {
    const pg = await startPostgres();
    t.teardown(pg.stop);
    url = pg.url;
  }
  const start = childGroup(t, { dataDir, ...(url ? { url } : {}), ...o }, CHILD);
  const bases: string[] = [];
  // One after the other: the first migrates the database, the second opens it migrated.
  for (const name of engine === 'postgres' ? ['a', 'b'] : ['a']) {
    const c = start(name, {});
    bases.push(String((await c.next((l) => l.ready === true)).base));
  }
  const call: Served['call'] = async (base, method, p, o = {}) => {
    const headers: Record<string, string> = { 'x-forwarded-for': o.ip ?? '192.0.2.1', ...o.headers };
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.cookie) headers.cookie = o.cookie;
    if (o.cookie && method !== 'GET') headers.origin = PUBLIC_ORIGIN;
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(base + p, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body), redirect: 'manual' });
    const text = await res.text();
    return { status: res.status, json: text.startsWith('{') ? JSON.parse(text) : text, cookie: /^[^;]+/.exec(res.headers.get('set-cookie') ?? '')?.[0] ?? null };
  };
  let n = 0;
  return {
    url: url ?? null,
    bases,
    base: (i) => bases[i % bases.length]!,
    call,
    async tenant(plan) {
      const b = bases[0]!;
      const su = await call(b, 'POST', '/v1/auth/signup', { body: { email: `q${++n}-${process.pid}@example.com`, password: 'correct horse battery', name: 'q' }, ip: `203.0.113.${n}` });
      if (su.status !== 201) throw new Error(`signup ${su.status} ${JSON.stringify(su.json)}`);
      const cookie = su.cookie!;
      const orgId = su.json.organization_id as string;
      const co = await call(b, 'POST', '/v1/billing/checkout', { cookie, body: { plan_id: plan, success_url: `${PUBLIC_ORIGIN}/ok` } });
      if (co.status !== 200) throw new Error(`checkout ${co.status} ${JSON.stringify(co.json)}`);
      const done = await call(b, 'GET', new URL(co.json.url as string).pathname);
      if (done.status !== 303) throw new Error(`checkout complete ${done.status}`);
      const k = await call(b, 'POST', '/v1/api-keys', { cookie, body: { name: 'k', scopes: ['machines:read', 'machines:write', 'machines:control', 'sessions:write'] } });
      if (k.status !== 201) throw new Error(`key ${k.status} ${JSON.stringify(k.json)}`);
      return { cookie, orgId, key: k.json.secret as string };
    },
  };
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


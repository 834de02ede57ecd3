/**
 * Control-plane test rig: a real SQLite file in a temp dir, the real services and app, a movable
 * clock, a log sink that keeps every line, and a small client over app.request().
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApp } from '../../control-plane/src/app.js';
import type { McpOptions } from '../../control-plane/src/mcp/endpoint.js';
import { parseConfig } from '../../control-plane/src/config.js';
import type { LogLine } from '../../control-plane/src/log.js';
import { createServices, type ServiceDeps } from '../../control-plane/src/services/index.js';
import { openRigDb, rigDatabaseEnv } from './rig-db.js';
import { createStore } from '../../control-plane/src/store/store.js';

export const PUBLIC_BASE_URL = 'http://cp.test';
export const PUBLIC_ORIGIN = 'http://cp.test';
/** Low scrypt cost for speed; the default cost is exercised by the password unit test. */
export const FAST_SCRYPT = { N: 1024, r: 8, p: 1 };

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export interface CallOpts {
  cookie?: string;
  key?: string;
  authorization?: string;
  body?: unknown;
  rawBody?: string;
  /** Defaults to the public origin for cookie-authenticated writes; pass null to omit it. */
  origin?: string | null;
  ip?: string;
  headers?: Record<string, string>;
}

export async function makeRig(opts: { env?: Record<string, string>; services?: Partial<ServiceDeps>; start?: Date; mcp?: McpOptions } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-test-'));
  const config = parseConfig({ PUBLIC_BASE_URL, DATA_DIR: dir, ...(await rigDatabaseEnv(dir)), ...opts.env });
  const db = await openRigDb(dir);
  const store = createStore(db);
  const clock = { t: (opts.start ?? new Date('2026-11-22T06:00:00.000Z')).getTime() };
  const now = () => new Date(clock.t);
  const services = await createServices({ passwordCost: FAST_SCRYPT, now, ...opts.services, config, store });
  const logs: LogLine[] = [];
  const app = createApp({ services, log: (l) => logs.push(l), checkResponses: true, mcp: opts.mcp });

  async function call(method: string, p: string, o: CallOpts = {}): Promise<Reply> {
    const headers: Record<string, string> = { ...o.headers };
    if (o.cookie) headers.cookie = o.cookie;
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.authorization !== undefined) headers.authorization = o.authorization;
    const write = method !== 'GET' && method !== 'HEAD';
    const origin = o.origin === undefined ? (o.cookie && write ? PUBLIC_ORIGIN : undefined) : o.origin ?? undefined;
    if (origin) headers.origin = origin;
    let body: string | undefined;
    if (o.rawBody !== undefined) body = o.rawBody;
    else if (o.body !== undefined) body = JSON.stringify(o.body);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await app.request(p, { method, headers, body }, { clientIp: o.ip ?? '192.0.2.1' });
    const text = await res.text();
    let json: any = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      /* html or empty */
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  let n = 0;
  /** Signs a new user up; returns their cookie, ids and e-mail. */
  async function user(label = 'u', ip?: string) {
    const email = `${label}${++n}-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const password = 'correct horse battery';
    const r = await call('POST', '/v1/auth/signup', { body: { email, password, name: label }, ip: ip ?? `198.51.100.${n % 250}` });
    if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${r.text}`);
    const cookie = /computer_session=([^;]+)/.exec(r.headers.get('set-cookie') ?? '')![1]!;
    return { email, password, cookie: `computer_session=${cookie}`, userId: r.json.user_id as string, orgId: r.json.organization_id as string };
  }

  /**
   * Starts `plan`'s trial for the cookie's active organization through the built-in provider's checkout: an
   * unsubscribed organization creates nothing (API keys included), so tests that need a key subscribe first.
   */
  async function subscribe(cookie: string, plan = 'developer'): Promise<void> {
    const co = await call('POST', '/v1/billing/checkout', { cookie, body: { plan_id: plan, success_url: `${PUBLIC_ORIGIN}/ok` } });
    if (co.status !== 200) throw new Error(`checkout ${co.status} ${co.text}`);
    const done = await call('GET', new URL(co.json.url).pathname);
    if (done.status !== 303) throw new Error(`checkout complete ${done.status}`);
  }

  return {
    dir, config, store, services, app, logs, clock, call, user, subscribe,
    async close() {
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
export type Rig = Awaited<ReturnType<typeof makeRig>>;

/** Every error body has exactly the spec's envelope. */
export function assertEnvelope(t: { equal: Function; type: Function; ok: Function; same: Function }, r: Reply, code: string, status: number): void {
  t.equal(r.status, status, `status ${status} for ${code}`);
  const e = r.json?.error;
  t.ok(e, 'has error object');
  t.same(Object.keys(r.json).sort(), ['error'], 'only error at top level');
  t.same(Object.keys(e).sort(), ['code', 'details', 'message', 'quota', 'request_id'], 'envelope keys');
  t.equal(e.code, code);
  t.type(e.message, 'string');
  t.ok(e.message.length > 0, 'message not empty');
  t.equal(e.request_id, r.headers.get('x-request-id'), 'request_id matches header');
  t.ok(/^req_[0-9a-z]+$/.test(e.request_id), 'request id shape');
  t.ok(Array.isArray(e.details), 'details array');
  if (code !== 'quota_exceeded') t.equal(e.quota, null, 'quota null');
}

/** Subscribes the cookie's active organization to `plan` (the rig's own checkout, with `pro` by default). */
export function subscribe(rig: Rig, cookie: string, plan = 'pro'): Promise<void> {
  return rig.subscribe(cookie, plan);
}

/** A new user invited into `orgId` with `role`, who accepted and switched to it. */
export async function join(rig: Rig, ownerCookie: string, orgId: string, role: string) {
  const u = await rig.user(role);
  const inv = await rig.call('POST', '/v1/invitations', { cookie: ownerCookie, body: { email: u.email, role } });
  if (inv.status !== 201) throw new Error(inv.text);
  const acc = await rig.call('POST', '/v1/invitations/accept', { cookie: u.cookie, body: { token: inv.json.token } });
  if (acc.status !== 200) throw new Error(acc.text);
  await rig.call('POST', '/v1/auth/switch-organization', { cookie: u.cookie, body: { organization_id: orgId } });
  return { ...u, membershipId: acc.json.membership.id as string };
}

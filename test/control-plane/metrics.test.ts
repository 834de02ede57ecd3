/**
 * GET /metrics on its own loopback listener (METRICS_PORT): off by default, never on the API port, and
 * its body parsed by a strict Prometheus text-format (0.0.4) parser written here: every sample line must
 * belong to a declared family, names and labels must be well-formed, values numbers, histograms
 * cumulative with a +Inf bucket equal to _count.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { FAST_SCRYPT } from '../helpers/control-plane.js';

interface Sample { name: string; labels: Record<string, string>; value: number }

function parseProm(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) continue;
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      if (!NAME.test(name!) || !['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(type!)) throw new Error(`bad TYPE line: ${line}`);
      if (types.has(name!)) throw new Error(`family declared twice: ${name}`);
      types.set(name!, type!);
      continue;
    }
    if (line.startsWith('#')) throw new Error(`unexpected comment: ${line}`);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[2]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)/y;
      let pos = 0;
      while (pos < m[2].length) {
        re.lastIndex = pos;
        const l = re.exec(m[2]);
        if (!l) throw new Error(`bad labels: ${line}`);
        labels[l[1]!] = l[2]!;
        pos = re.lastIndex;
      }
    }
    const value = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : m[3] === 'NaN' ? NaN : Number(m[3]);
    if (!/^[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|Inf|NaN)$/.test(m[3]!)) throw new Error(`bad value: ${line}`);
    const family = [...types.keys()].find((f) => m[1] === f || ((types.get(f) === 'histogram' || types.get(f) === 'summary') && [`${f}_bucket`, `${f}_sum`, `${f}_count`].includes(m[1]!)));
    if (!family) throw new Error(`sample without a TYPE: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return { types, samples };
}

t.test('metrics: off by default, on METRICS_PORT a parseable exposition', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-metrics-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const off = await serve(parseConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: path.join(dir, 'a') }), { log: () => {}, services: { passwordCost: FAST_SCRYPT } });
  t.equal(off.metricsUrl, null, 'off unless METRICS_PORT is set');
  t.equal((await fetch(`${off.url}/metrics`)).status, 404, 'never on the API port');
  await off.close();

  const on = await serve(parseConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: path.join(dir, 'b'), METRICS_PORT: '0' }), { log: () => {}, services: { passwordCost: FAST_SCRYPT } });
  t.teardown(() => on.close());
  t.match(on.metricsUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/, 'loopback listener');
  for (let i = 0; i < 3; i++) t.equal((await fetch(`${on.url}/v1/plans`)).status, 200);
  t.equal((await fetch(`${on.url}/v1/nope`)).status, 404);

  const res = await fetch(on.metricsUrl!);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const { types, samples } = parseProm(await res.text());
  t.equal(types.get('computer_machines'), 'gauge');
  t.equal(types.get('computer_api_request_duration_seconds'), 'histogram');
  t.equal(types.get('computer_egress_bytes_total'), 'counter');
  t.equal(types.get('computer_machine_operation_failures_total'), 'counter');
  t.same(samples.filter((s) => s.name === 'computer_machines').map((s) => [s.labels.state, s.value]),
    [['creating', 0], ['running', 0], ['stopping', 0], ['stopped', 0], ['starting', 0], ['error', 0], ['deleting', 0]]);
  const count = samples.find((s) => s.name === 'computer_api_request_duration_seconds_count' && s.labels.operation === 'plans.list');
  t.equal(count?.value, 3, 'three plans.list requests observed');
  const buckets = samples.filter((s) => s.name === 'computer_api_request_duration_seconds_bucket' && s.labels.operation === 'plans.list');
  for (let i = 1; i < buckets.length; i++) t.ok(buckets[i]!.value >= buckets[i - 1]!.value, 'cumulative buckets');
  t.same(buckets.at(-1), { name: 'computer_api_request_duration_seconds_bucket', labels: { le: '+Inf', operation: 'plans.list', status: '2xx' }, value: 3 });
  t.equal(samples.find((s) => s.name === 'computer_egress_bytes_total')?.value, 0);
  t.throws(() => parseProm('# TYPE x counter\ny 1\n'), /sample without a TYPE/, 'the parser is strict');
  t.throws(() => parseProm('# TYPE x counter\nx{a=b} 1\n'), /bad labels/);
  t.equal((await fetch(on.metricsUrl!.replace('/metrics', '/other'))).status, 404);
});

t.test('metrics: boot and capture durations, agent call failures, layer store bytes', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-metrics-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fake = new FakeSubstrate();
  // No warm pool: the boots counted here are the test's own.
  const config = parseConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, METRICS_PORT: '0', WARM_POOL_PER_SIZE: '0' });
  const on = await serve(config, {
    log: () => {},
    // No readiness probe: its agent calls would add failures this test does not make.
    services: { passwordCost: FAST_SCRYPT, substrate: fake, readyProbe: false, agentTimeouts: { connectMs: 300, requestMs: 300 } },
  });
  t.teardown(() => on.close());
  const json = async (method: string, p: string, o: { cookie?: string; key?: string; body?: unknown } = {}) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    // Cookie-authenticated writes need the configured public origin.
    if (o.cookie) Object.assign(headers, { cookie: o.cookie, origin: config.publicOrigin });
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    const r = await fetch(`${on.url}${p}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body), redirect: 'manual' });
    const text = await r.text();
    return { status: r.status, headers: r.headers, json: text ? (() => { try { return JSON.parse(text); } catch { return null; } })() : null };
  };
  const su = await json('POST', '/v1/auth/signup', { body: { email: 'metrics@example.com', password: 'correct horse battery' } });
  const cookie = su.headers.get('set-cookie')!.split(';')[0]!;
  const co = await json('POST', '/v1/billing/checkout', { cookie, body: { plan_id: 'pro', success_url: `${config.publicOrigin}/` } });
  t.equal((await fetch(`${on.url}${new URL(co.json.url).pathname}`, { redirect: 'manual' })).status, 303);
  const key = (await json('POST', '/v1/api-keys', { cookie, body: { name: 'k', scopes: ['machines:read', 'machines:write', 'machines:control', 'snapshots:write'] } })).json.secret;
  const m = (await json('POST', '/v1/machines', { key, body: {} })).json;
  for (let i = 0; i < 100 && (await json('GET', `/v1/machines/${m.id}`, { key })).json.state !== 'running'; i++) await new Promise((r) => setTimeout(r, 50));
  fake.machines.get(m.id)!.files.set('/home/agent/notes.txt', 'x'.repeat(12345));
  t.equal((await json('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: m.id } })).status, 201);
  // The channel cannot be opened (unavailable); then it opens, but no agent is behind it (timeout).
  fake.failNext('openChannel');
  t.equal((await json('GET', `/v1/machines/${m.id}/display`, { key })).status, 503);
  t.equal((await json('GET', `/v1/machines/${m.id}/display`, { key })).status, 503);

  const { types, samples } = parseProm(await (await fetch(on.metricsUrl!)).text());
  t.equal(types.get('computer_machine_boot_duration_seconds'), 'histogram');
  t.equal(types.get('computer_snapshot_capture_duration_seconds'), 'histogram');
  t.equal(types.get('computer_agent_call_failures_total'), 'counter');
  t.equal(types.get('computer_layer_store_bytes'), 'gauge');
  const one = (name: string, labels: Record<string, string>) => samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).map((s) => s.value);
  t.same(one('computer_machine_boot_duration_seconds_count', { operation: 'create', outcome: 'ok' }), [1], 'one boot (the create)');
  t.same(one('computer_snapshot_capture_duration_seconds_count', { outcome: 'ok' }), [1], 'one capture');
  t.same(one('computer_snapshot_capture_duration_seconds_bucket', { outcome: 'ok', le: '+Inf' }), [1]);
  t.same(one('computer_agent_call_failures_total', { reason: 'unavailable' }), [1], 'the channel failure');
  t.same(one('computer_agent_call_failures_total', { reason: 'timeout' }), [1], 'the unanswered call');
  t.same(one('computer_layer_store_bytes', {}), [12345], 'the captured layer');
  t.same(one('computer_machines', { state: 'running' }), [1]);
});

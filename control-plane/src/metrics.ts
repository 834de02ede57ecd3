/**
 * Operator metrics in the Prometheus text format (prom-client), served on their own listener
 * (METRICS_PORT, loopback only, off by default): nothing here is per tenant, and nothing is reachable
 * from the public port. Request durations and failures are taken from the operator log lines, so no
 * route or service carries metrics code.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { MachineState } from '../../shared/schemas/machine.js';
import type { LogLine } from './log.js';
import type { Services } from './services/index.js';
import type { TimedOp } from './substrate/timed.js';

export function createMetrics(s: Services) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'computer_machines',
    help: 'Live machines by state',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const counts = new Map((await s.store.machines.countByState()).map((r) => [r.state, r.n]));
      for (const st of MachineState.options) this.set({ state: st }, counts.get(st) ?? 0);
    },
  });
  const requests = new Histogram({
    name: 'computer_api_request_duration_seconds',
    help: 'API request duration by operation and status class',
    labelNames: ['operation', 'status'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const failures = new Counter({
    name: 'computer_machine_operation_failures_total',
    help: 'Substrate or agent failures of machine operations, by operation',
    labelNames: ['operation'],
    registers: [registry],
  });
  // Boots (a create that starts the machine, or a start: until the guest runs) and disk captures, timed
  // around the substrate calls by substrate/timed.ts (main.ts wraps the substrate when metrics are on).
  const boots = new Histogram({
    name: 'computer_machine_boot_duration_seconds',
    help: 'Substrate boot duration (create with start, or start) by operation and outcome',
    labelNames: ['operation', 'outcome'],
    buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300],
    registers: [registry],
  });
  const captures = new Histogram({
    name: 'computer_snapshot_capture_duration_seconds',
    help: 'Disk capture duration (snapshots, stop captures, templates) by outcome',
    labelNames: ['outcome'],
    buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  });
  const agentFailures = new Counter({
    name: 'computer_agent_call_failures_total',
    help: 'Agent requests that got no answer, by reason (timeout: deadline passed; unavailable: unreachable or connection failed)',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of ['timeout', 'unavailable']) agentFailures.inc({ reason }, 0);
  s.pool.onCallFailure((reason) => agentFailures.inc({ reason }));
  new Gauge({
    name: 'computer_layer_store_bytes',
    help: 'Bytes of the distinct layers held by ready snapshots and templates (as captured)',
    registers: [registry],
    async collect() {
      this.set(await s.store.snapshots.layerBytes());
    },
  });
  new Counter({
    name: 'computer_egress_bytes_total',
    help: 'Bytes served to clients (gateway, previews, file reads) since start',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(s.metering.egress.total);
    },
  });
  return {
    registry,
    /** Wraps the operator log: request lines feed the histogram, failure lines the counter. */
    observe(line: LogLine): void {
      if (line.event === 'request' && typeof line.ms === 'number') {
        requests.observe({ operation: String(line.operation), status: `${String(line.status).charAt(0)}xx` }, line.ms / 1000);
      } else if (line.event === 'machine_operation_failed') {
        failures.inc({ operation: String(line.operation) });
      }
    },
    /** Substrate timings (substrate/timed.ts). */
    observeSubstrate(op: TimedOp, seconds: number, ok: boolean): void {
      const outcome = ok ? 'ok' : 'error';
      if (op === 'capture') captures.observe({ outcome }, seconds);
      else boots.observe({ operation: op, outcome }, seconds);
    },
    /** The /metrics listener on 127.0.0.1. */
    async listen(port: number): Promise<{ url: string; close(): Promise<void> }> {
      const server = http.createServer((req, res) => {
        if (req.method !== 'GET' || req.url !== '/metrics') {
          res.writeHead(404).end();
          return;
        }
        registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
          () => res.writeHead(500).end(),
        );
      });
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`,
        close: () => new Promise<void>((r) => server.close(() => r())),
      };
    },
  };
}

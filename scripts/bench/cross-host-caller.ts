/**
 * The caller of the `crosshost` bench (scripts/bench/cross-host.ts), a child with its own event loop: a tenant's
 * client is not part of the service, so it must not share the loop of A (the driver) or of B (the forwarding process),
 * or one path pays for it and the other does not. Reads one JSON line on stdin (`CallerPlan`: both URLs, the key and
 * the machine, never on the command line), sends a JPEG screenshot and a pointer move to A directly, through B and
 * through the bare proxy P, interleaved (which goes first turns, so drift hits all three), and prints one JSON line of
 * `CallerTimes`.
 */
import readline from 'node:readline';
import { Agent } from 'undici';
import { z } from 'zod';
import { benchCaller, type BenchCall } from './api.js';
import { runAlone } from './run-alone.js';

export const CallerPlan = z.object({
  a: z.string(),
  b: z.string(),
  /** The bare proxy in front of A (cross-host-proxy.ts): the floor of a hop. */
  p: z.string(),
  key: z.string(),
  machineId: z.string(),
  sessionId: z.string(),
  fence: z.string(),
  n: z.number().int().positive(),
  warmup: z.number().int().nonnegative(),
});
export type CallerPlan = z.infer<typeof CallerPlan>;

/** Milliseconds per request, warm-up left out: A direct, B forwarded and P (the bare proxy), for each request kind. */
const Times = z.array(z.number());
export const CallerTimes = z.object({ shotA: Times, shotB: Times, shotP: Times, moveA: Times, moveB: Times, moveP: Times });
export type CallerTimes = z.infer<typeof CallerTimes>;

async function timed(fn: () => Promise<{ status: number }>, ok: number): Promise<number> {
  const t0 = performance.now();
  const r = await fn();
  if (r.status !== ok) throw new Error(`answered ${r.status}`);
  return performance.now() - t0;
}

export async function callAll(p: CallerPlan): Promise<CallerTimes> {
  const dispatcher = new Agent({ connections: 8, pipelining: 1 });
  const viaA = benchCaller(p.a, dispatcher);
  const viaB = benchCaller(p.b, dispatcher);
  const viaP = benchCaller(p.p, dispatcher);
  const input = { 'x-session-id': p.sessionId, 'x-lease-fence': p.fence };
  const shotOf = (call: BenchCall) => () => call('GET', `/v1/machines/${p.machineId}/screenshot?format=jpeg&quality=80`, { key: p.key });
  const moveOf = (call: BenchCall, i: number) => () =>
    call('POST', `/v1/machines/${p.machineId}/mouse/move`, { key: p.key, body: { x: 100 + (i % 50), y: 100 }, headers: input });
  const t: CallerTimes = { shotA: [], shotB: [], shotP: [], moveA: [], moveB: [], moveP: [] };
  const paths = [{ call: viaA, shot: t.shotA, move: t.moveA }, { call: viaB, shot: t.shotB, move: t.moveB }, { call: viaP, shot: t.shotP, move: t.moveP }];
  try {
    for (let i = 0; i < p.n + p.warmup; i++) {
      // Which path goes first turns with each round, so drift hits all three alike.
      const order = [0, 1, 2].map((k) => paths[(i + k) % 3]!);
      for (const path of order) {
        const shot = await timed(shotOf(path.call), 200);
        if (i >= p.warmup) path.shot.push(shot);
      }
      for (const path of order) {
        const move = await timed(moveOf(path.call, i), 200);
        if (i >= p.warmup) path.move.push(move);
      }
    }
    return t;
  } finally {
    await dispatcher.close();
  }
}

runAlone(import.meta.url, async () => {
  const first = await new Promise<string>((resolve) => readline.createInterface({ input: process.stdin }).once('line', resolve));
  const times = await callAll(CallerPlan.parse(JSON.parse(first)));
  // A pipe's writes are asynchronous: exit only once the line is out.
  await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(times)}\n`, () => resolve()));
});

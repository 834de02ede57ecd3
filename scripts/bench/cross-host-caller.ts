/**
 * The caller of the `crosshost` bench (scripts/bench/cross-host.ts), a child with its own event loop: a tenant's
 * client is not part of the service, so it must not share the loop of A (the driver) or of B (the forwarding process),
 * or one path pays for it and the other does not. Reads one JSON line on stdin (`CallerPlan`: both URLs, the key and
 * the machine, never on the command line), sends a JPEG screenshot and a pointer move to A directly and through B,
 * interleaved (which side goes first alternates, so drift hits both), and prints one JSON line of `CallerTimes`.
 */
import readline from 'node:readline';
import { Agent } from 'undici';
import { z } from 'zod';
import { benchCaller, type BenchCall } from './api.js';
import { runAlone } from './run-alone.js';

export const CallerPlan = z.object({
  a: z.string(),
  b: z.string(),
  key: z.string(),
  machineId: z.string(),
  sessionId: z.string(),
  fence: z.string(),
  n: z.number().int().positive(),
  warmup: z.number().int().nonnegative(),
});
export type CallerPlan = z.infer<typeof CallerPlan>;

/** Milliseconds per request, warm-up left out: A direct and B forwarded, for each request kind. */
export const CallerTimes = z.object({ shotA: z.array(z.number()), shotB: z.array(z.number()), moveA: z.array(z.number()), moveB: z.array(z.number()) });
export type CallerTimes = z.infer<typeof CallerTimes>;

async function timed(fn: () => Promise<{ status: number }>, ok: number): Promise<number> {
  const t0 = performance.now();
  const r = await fn();
  if (r.status !== ok) throw new Error(`answered ${r.status}`);
  return performance.now() - t0;
}

export async function callBoth(p: CallerPlan): Promise<CallerTimes> {
  const dispatcher = new Agent({ connections: 8, pipelining: 1 });
  const viaA = benchCaller(p.a, dispatcher);
  const viaB = benchCaller(p.b, dispatcher);
  const input = { 'x-session-id': p.sessionId, 'x-lease-fence': p.fence };
  const shot = (call: BenchCall) => () => call('GET', `/v1/machines/${p.machineId}/screenshot?format=jpeg&quality=80`, { key: p.key });
  const move = (call: BenchCall, i: number) => () =>
    call('POST', `/v1/machines/${p.machineId}/mouse/move`, { key: p.key, body: { x: 100 + (i % 50), y: 100 }, headers: input });
  const t: CallerTimes = { shotA: [], shotB: [], moveA: [], moveB: [] };
  try {
    for (let i = 0; i < p.n + p.warmup; i++) {
      const aFirst = i % 2 === 0;
      const pair = aFirst ? [viaA, viaB] : [viaB, viaA];
      const shots: number[] = [];
      for (const c of pair) shots.push(await timed(shot(c), 200));
      const moves: number[] = [];
      for (const c of pair) moves.push(await timed(move(c, i), 200));
      if (i < p.warmup) continue;
      const [sa, sb] = aFirst ? shots : [shots[1]!, shots[0]!];
      const [ma, mb] = aFirst ? moves : [moves[1]!, moves[0]!];
      t.shotA.push(sa!);
      t.shotB.push(sb!);
      t.moveA.push(ma!);
      t.moveB.push(mb!);
    }
    return t;
  } finally {
    await dispatcher.close();
  }
}

runAlone(import.meta.url, async () => {
  const first = await new Promise<string>((resolve) => readline.createInterface({ input: process.stdin }).once('line', resolve));
  const times = await callBoth(CallerPlan.parse(JSON.parse(first)));
  // A pipe's writes are asynchronous: exit only once the line is out.
  await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(times)}\n`, () => resolve()));
});

/** Small timing helpers for benchmarks (never used by tests: speed targets live here only). */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export interface Summary {
  n: number;
  p50: number;
  p99: number;
  mean: number;
}

export async function measure(n: number, fn: (i: number) => Promise<unknown>, warmup = Math.min(5, n)): Promise<Summary> {
  for (let i = 0; i < warmup; i++) await fn(i);
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await fn(i);
    xs.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  xs.sort((a, b) => a - b);
  return { n, p50: percentile(xs, 50), p99: percentile(xs, 99), mean: xs.reduce((a, b) => a + b, 0) / xs.length };
}

export function fmt(s: Summary): string {
  return `p50 ${s.p50.toFixed(2)} ms  p99 ${s.p99.toFixed(2)} ms  (n=${s.n})`;
}

export function line(label: string, value: string): void {
  console.log(`${label.padEnd(44)} ${value}`);
}

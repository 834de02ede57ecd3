/** What the CLI prints: tables and JSON for listings, errors rendered from the API's envelope. */
import { ComputerError, type Quota } from '../../sdk/src/index.js';
import { TerminalClosedError } from '../../sdk/src/terminal.js';

/** Bad command line: printed with the command's usage, exit status 2. */
export class UsageError extends Error {
  constructor(message: string, readonly usage?: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const EXIT = { ok: 0, error: 1, usage: 2 } as const;

export interface Io {
  out: NodeJS.WritableStream;
  err: NodeJS.WriteStream;
}

/** Left-aligned columns separated by two spaces; cells with control characters are escaped (names are tenant text). */
export function table(headers: string[], rows: Array<Array<string | number | null | undefined>>): string {
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : sanitize(String(c)))));
  const width = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(width[i]!))).join('  ');
  return [line(headers), ...cells.map(line)].join('\n') + '\n';
}

/** Server-supplied text never reaches the terminal as escape sequences. */
export function sanitize(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

export function printJson(io: Io, value: unknown): void {
  io.out.write(JSON.stringify(value, null, 2) + '\n');
}

/**
 * A quota refusal in words, from the `quota` object alone (the spec: clients render `quota`, not the message).
 * A null maximum is negotiated, never unlimited.
 */
export function describeQuota(q: Quota): string {
  const plan = sanitize(q.plan_id);
  if (q.limit === 'subscription') {
    if (q.maximum === null) return `the ${plan} plan is negotiated and no agreement is in effect`;
    if (q.maximum === 0) return `the organization has no active subscription (plan ${plan}); subscribe to create or start anything`;
    return `the trial's included use is used up: ${q.current} of ${q.maximum} (plan ${plan})`;
  }
  const what = q.limit.replaceAll('_', ' ');
  if (q.maximum === null) return `${what}: ${q.current} in use; the ${plan} plan's maximum is negotiated and none is in effect`;
  return `${what}: ${q.current} in use of the ${plan} plan's ${q.maximum}`;
}

/**
 * An error as lines for stderr: the envelope's code and message (for a quota refusal, the quota in words
 * instead of the message), each field detail, the raw quota with where to upgrade, and the request id to quote
 * to support.
 */
export function renderError(e: unknown, baseUrl?: string): string {
  if (e instanceof ComputerError) {
    const lines = [`error: ${e.quota ? describeQuota(e.quota) : sanitize(e.message)} (${e.code}, HTTP ${e.status})`];
    for (const d of e.details) lines.push(`  ${sanitize(d.field)}: ${sanitize(d.message)}`);
    if (e.quota) {
      const q = e.quota;
      lines.push(`  quota: ${q.limit} is at ${q.current} of ${q.maximum ?? 'a negotiated maximum'} on plan ${sanitize(q.plan_id)}`);
      lines.push(q.upgrade_url ? `  upgrade: ${sanitize(q.upgrade_url)}` : '  upgrade your plan (`GET /v1/plans`) or free capacity to raise this limit');
    }
    if (e.requestId) lines.push(`  request id: ${e.requestId}`);
    return lines.join('\n') + '\n';
  }
  if (e instanceof UsageError) return `error: ${e.message}\n${e.usage ? `usage: ${e.usage}\n` : ''}`;
  if (e instanceof TerminalClosedError) return `error: ${e.message} (close code ${e.closeCode})\n`;
  const cause = e instanceof Error ? (e.cause as NodeJS.ErrnoException | undefined) : undefined;
  // fetch() wraps connection failures as "fetch failed" with the errno in `cause`.
  if (cause?.code && ['ECONNREFUSED', 'ENOTFOUND', 'ECONNRESET', 'EHOSTUNREACH', 'ETIMEDOUT', 'EAI_AGAIN'].includes(cause.code)) {
    return `error: cannot reach ${baseUrl ?? 'the server'} (${cause.code}); set COMPUTER_BASE_URL or run \`computer login --base-url …\`\n`;
  }
  return `error: ${e instanceof Error ? e.message : String(e)}\n`;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/**
 * Control-plane logging. A request line carries request id, operation name, organization, method,
 * status and duration. Never a secret, key, password, cookie, e-mail, header, query or body.
 * The sink is injected so tests can scan everything that was logged.
 */
export type LogValue = string | number | boolean | null;
export type LogLine = { event: string; [k: string]: LogValue };
export type LogSink = (line: LogLine) => void;

export function stderrLog(line: LogLine): void {
  process.stderr.write(JSON.stringify({ t: new Date().toISOString(), ...line }) + '\n');
}

export const silentLog: LogSink = () => {};

/**
 * An error and its causes, outermost first, for the operator's log: `name(code): message` per level joined by
 * ` <- `, at most 6 levels of 300 characters. Messages can hold host paths (fine for the operator) and, from a
 * failed command, its argv and stderr; anything shaped like a credential (a Bearer value, an `sk_` key, a long
 * run of base64url characters such as a machine's agent token) is replaced by `[redacted]`; paths stay.
 */
export function causeChain(e: unknown): string {
  const parts: string[] = [];
  let cur: unknown = e;
  for (let i = 0; i < 6 && cur !== undefined && cur !== null; i++) {
    const err = cur as { name?: unknown; code?: unknown; message?: unknown; cause?: unknown };
    const name = typeof err.name === 'string' ? err.name : typeof cur;
    const code = typeof err.code === 'string' || typeof err.code === 'number' ? `(${err.code})` : '';
    const message = typeof err.message === 'string' ? err.message : typeof cur === 'string' ? cur : '';
    parts.push(redact(`${name}${code}: ${message}`.replace(/\s+/g, ' ').slice(0, 300)));
    cur = typeof cur === 'object' ? err.cause : undefined;
  }
  return parts.join(' <- ');
}

export function redact(text: string): string {
  return text
    .replace(/(bearer\s+)\S+/gi, '$1[redacted]')
    .replace(/\bsk_[A-Za-z0-9_-]+/g, '[redacted]')
    .replace(/[A-Za-z0-9_-]{32,}/g, '[redacted]');
}

/** The operator's line for a failed machine operation: which machine, what, the error code and the cause chain. */
export function machineFailureLine(machineId: string, operation: string, cause: unknown): LogLine {
  const code = (cause as { code?: unknown })?.code;
  return {
    event: 'machine_operation_failed',
    machine_id: machineId,
    operation,
    code: typeof code === 'string' ? code : 'internal_error',
    cause: causeChain(cause),
  };
}

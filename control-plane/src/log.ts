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

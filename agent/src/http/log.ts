/**
 * Agent logging. A request line carries the route template, status, response size and duration,
 * and nothing else: never a body, header, query, path, clipboard text, typed text or command line.
 */
export type LogLine =
  | { event: 'request'; method: string; route: string; status: number; bytes: number; ms: number }
  | { event: string; [k: string]: string | number | boolean };

export type LogSink = (line: LogLine) => void;

export function stderrLog(line: LogLine): void {
  process.stderr.write(JSON.stringify({ t: new Date().toISOString(), ...line }) + '\n');
}

export const silentLog: LogSink = () => {};

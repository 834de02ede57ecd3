/**
 * The gateway's terminal channel (docs/gateway.md) as a Node duplex byte stream: what is written goes to
 * the pty as binary messages, what the pty prints is readable, unmodified (no text decoding anywhere).
 * `resize()` sends the channel's resize message; `exited` settles with the remote program's exit status
 * (`exit` message + close 1000) or rejects with a TerminalClosedError for any other close.
 */
import { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import { CLOSE_CODES, type TerminalClientMessage, type TerminalServerMessage } from '../../../shared/schemas/gateway.js';
import { openChannel } from './channels.js';

/** The socket closed without the pty exiting (4409 another client, 4503 machine unreachable, 4404 gone …). */
export class TerminalClosedError extends Error {
  constructor(readonly closeCode: number, reason: string) {
    super(reason || TerminalClosedError.describe(closeCode));
    this.name = 'TerminalClosedError';
  }
  static describe(code: number): string {
    switch (code) {
      case CLOSE_CODES.conflict:
        return 'the terminal already has a client attached';
      case CLOSE_CODES.not_found:
        return 'the terminal does not exist or has exited';
      case CLOSE_CODES.compute_unavailable:
        return "the machine's agent is unreachable (stopped, restarting or restored)";
      case CLOSE_CODES.unauthenticated:
        return 'the credential is no longer valid';
      case CLOSE_CODES.permission_denied:
        return 'permission denied';
      case CLOSE_CODES.going_away:
        return 'the server is shutting down';
      default:
        return `the terminal channel closed (${code})`;
    }
  }
}

export class TerminalStream extends Duplex {
  /** The remote program's exit status (null when it ended without one, e.g. killed). */
  readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;

  constructor(private readonly ws: WebSocket) {
    super();
    let settle!: (c: number | null) => void;
    let fail!: (e: Error) => void;
    this.exited = new Promise((res, rej) => {
      settle = res;
      fail = rej;
    });
    // A caller awaiting only the data must not crash on an unobserved rejection.
    this.exited.catch(() => {});
    ws.on('message', (data, isBinary) => {
      const buf = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      if (isBinary) {
        this.push(buf);
        return;
      }
      let m: TerminalServerMessage;
      try {
        m = JSON.parse(buf.toString('utf8')) as TerminalServerMessage;
      } catch {
        return;
      }
      if (m.type === 'exit') this.exitCode = typeof m.exit_code === 'number' ? m.exit_code : null;
      else if (m.type === 'error') this.emit('warning', new Error(`${m.code}: ${m.message}`));
    });
    ws.once('close', (code, reason) => {
      this.push(null);
      if (code === CLOSE_CODES.normal && this.exitCode !== undefined) settle(this.exitCode);
      else fail(new TerminalClosedError(code, reason.toString()));
    });
    ws.on('error', (e) => fail(e));
  }

  override _read(): void {
    // Output is pushed as it arrives; the gateway paces the agent by the socket's buffered amount.
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    if (this.ws.readyState !== WebSocket.OPEN) return cb();
    this.ws.send(chunk, { binary: true }, (e) => cb(e ?? null));
  }

  override _final(cb: () => void): void {
    cb();
  }

  resize(cols: number, rows: number): void {
    const m: TerminalClientMessage = { type: 'resize', cols, rows };
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
  }

  /** Detaches: the pty keeps running and replays its later output to the next client. */
  detach(): void {
    this.ws.close(1000);
  }
}

/** Opens the channel; a refused handshake rejects with the envelope's ComputerError. */
export async function attachTerminal(url: string, headers: Record<string, string>): Promise<TerminalStream> {
  let stream!: TerminalStream;
  // Listen before 'open' resolves: the replay of earlier output may arrive in the same tick.
  await openChannel(url, headers, (ws) => (stream = new TerminalStream(ws)));
  return stream;
}

/**
 * The gateway's screen and events channels (docs/gateway.md) as async iterators, and the handshake every
 * channel shares: a refused handshake is the API's error envelope, rejected as a ComputerError.
 */
import { WebSocket, type RawData } from 'ws';
import { CLOSE_CODES, type EventsServerMessage, type ScreenStatusMessage } from '../../../shared/schemas/gateway.js';
import { ComputerError, errorFromBody } from './errors.js';

/** The socket closed other than normally (4401 revoked key, 4404 deleted machine, 4503 unreachable …). */
export class ChannelClosedError extends Error {
  constructor(readonly closeCode: number, reason: string) {
    super(reason || `the channel closed (${closeCode})`);
    this.name = 'ChannelClosedError';
  }
}

/**
 * Opens a WebSocket; resolves once open. `listen` is called with the socket before 'open' (the server may
 * send its first message in the same tick as the handshake's answer).
 */
export function openChannel(url: string, headers: Record<string, string>, listen: (ws: WebSocket) => void = () => {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.once('unexpected-response', (_req, res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => reject(new ComputerError(res.statusCode ?? 0, errorFromBody(res.statusCode ?? 0, Buffer.concat(parts).toString('utf8')))));
      ws.on('error', () => {});
    });
    ws.once('error', reject);
    listen(ws);
    ws.once('open', () => resolve(ws));
  });
}

const asBuffer = (data: RawData): Buffer => (Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));

/**
 * The pull side both iterators share: `take()` hands over what is waiting, `finish()` ends the
 * iteration (with an error to throw, or null for a plain end) once nothing is waiting any more.
 */
abstract class PullIterator<T> implements AsyncIterable<T> {
  protected ended: { error: Error | null } | null = null;
  private wake: (() => void) | null = null;

  protected abstract take(): T | undefined;
  abstract close(): void;

  protected finish(error: Error | null): void {
    this.ended ??= { error };
    this.notify();
  }

  protected notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      const v = this.take();
      if (v !== undefined) return { value: v, done: false };
      if (this.ended) {
        if (this.ended.error) throw this.ended.error;
        return { value: undefined, done: true };
      }
      await new Promise<void>((r) => (this.wake = r));
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.next(), return: async () => (this.close(), { value: undefined, done: true }) };
  }
}

export interface ScreenFrame {
  /** One complete encoded image. */
  image: Buffer;
  format: 'jpeg' | 'webp';
  width: number;
  height: number;
}

/**
 * Screen frames as an async iterator. Only the newest frame waits for a slow consumer (older unread ones
 * are replaced, as the gateway does for a slow socket): a loop always sees the current screen, never a
 * backlog. `status` is the last status message (desktop up/down, size). Iteration ends on `close()` or
 * a normal close by the server; any other close throws a ChannelClosedError.
 */
export class ScreenStream extends PullIterator<ScreenFrame> {
  status: ScreenStatusMessage | null = null;
  /** Frames replaced before they were read. */
  dropped = 0;
  private pending: ScreenFrame | null = null;

  constructor(private readonly ws: WebSocket, private readonly onStatus?: (s: ScreenStatusMessage) => void) {
    super();
    ws.on('message', (data, isBinary) => {
      const buf = asBuffer(data);
      if (isBinary) {
        if (!this.status) return;
        if (this.pending) this.dropped++;
        this.pending = { image: buf, format: this.status.format, width: this.status.width, height: this.status.height };
      } else {
        let m: ScreenStatusMessage;
        try {
          m = JSON.parse(buf.toString('utf8')) as ScreenStatusMessage;
        } catch {
          return;
        }
        if (m.type !== 'status') return;
        this.status = m;
        this.onStatus?.(m);
      }
      this.notify();
    });
    ws.once('close', (code, reason) => {
      const normal = code === CLOSE_CODES.normal || code === CLOSE_CODES.going_away || code === 1005;
      this.finish(normal ? null : new ChannelClosedError(code, reason.toString()));
    });
    ws.on('error', () => {});
  }

  protected take(): ScreenFrame | undefined {
    const f = this.pending;
    this.pending = null;
    return f ?? undefined;
  }

  close(): void {
    this.finish(null);
    this.ws.close(1000);
  }
}

export type MachineEvent = EventsServerMessage['event'];
export interface EventDelivery {
  /** Pass as `cursor` to a later `events()` to resume right after this event. */
  cursor: string;
  event: MachineEvent;
}

/** Close codes after which reconnecting cannot help. */
const FINAL = new Set<number>([CLOSE_CODES.unauthenticated, CLOSE_CODES.permission_denied, CLOSE_CODES.not_found]);

/**
 * A machine's events as an async iterator that survives dropped connections: every reconnect resumes
 * from the cursor of the last event delivered to the loop, so events are neither skipped nor repeated.
 * Events are queued unbounded between reads (the gateway never drops events; a consumer too slow for
 * the socket is closed with 4408 and this resumes too). Started without a cursor it yields events
 * appended after the first connection; a connection lost before the first event reconnects "from now".
 * Gives up (throws) on a refused handshake (401/403/404: the envelope as a ComputerError), on 4401,
 * 4403, 4404, and after `maxReconnects` consecutive failed attempts.
 */
export class EventStream extends PullIterator<EventDelivery> {
  /** The cursor of the last event handed to the consumer. */
  cursor: string | null;
  /** Connections opened after the first (resumes). */
  reconnects = 0;
  private queue: EventDelivery[] = [];
  private ws: WebSocket | null = null;
  /** The last cursor received on the socket (≥ `cursor`: queued events are not yet handed over). */
  private received: string | null;

  constructor(
    private readonly url: (cursor: string | null) => string,
    private readonly headers: Record<string, string>,
    o: { cursor?: string; maxReconnects?: number; backoffMs?: number } = {},
  ) {
    super();
    this.cursor = o.cursor ?? null;
    this.received = this.cursor;
    this.maxReconnects = o.maxReconnects ?? 10;
    this.backoffMs = o.backoffMs ?? 250;
  }
  private readonly maxReconnects: number;
  private readonly backoffMs: number;

  /** Opens the first connection (a refusal rejects here). */
  async start(): Promise<this> {
    await this.connect();
    return this;
  }

  private connect(): Promise<WebSocket> {
    return openChannel(this.url(this.received), this.headers, (ws) => {
      this.ws = ws;
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        let m: EventsServerMessage;
        try {
          m = JSON.parse(asBuffer(data).toString('utf8')) as EventsServerMessage;
        } catch {
          return;
        }
        if (m.type !== 'event' || typeof m.cursor !== 'string') return;
        this.received = m.cursor;
        this.queue.push({ cursor: m.cursor, event: m.event });
        this.notify();
      });
      ws.once('close', (code, reason) => {
        if (this.ended || this.ws !== ws) return;
        if (FINAL.has(code)) this.finish(new ChannelClosedError(code, reason.toString()));
        else void this.resume();
      });
      ws.on('error', () => {});
    });
  }

  private async resume(): Promise<void> {
    for (let attempt = 0; !this.ended; attempt++) {
      if (attempt >= this.maxReconnects) return this.finish(new Error(`events: gave up after ${attempt} reconnection attempts`));
      await new Promise((r) => setTimeout(r, Math.min(8000, this.backoffMs * 2 ** attempt)));
      if (this.ended) return;
      try {
        await this.connect();
        this.reconnects++;
        return;
      } catch (e) {
        // A refusal with an envelope (key revoked, machine deleted) is final; a network error is retried.
        if (e instanceof ComputerError && e.status !== 503) return this.finish(e);
      }
    }
  }

  protected take(): EventDelivery | undefined {
    const d = this.queue.shift();
    if (d) this.cursor = d.cursor;
    return d;
  }

  close(): void {
    this.finish(null);
    this.ws?.close(1000);
  }
}

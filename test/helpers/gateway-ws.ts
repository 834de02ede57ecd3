/** A recording WebSocket test client for the gateway channels. */
import { WebSocket } from 'ws';

export interface Refusal {
  status: number;
  body: any;
}

export class WsClient {
  readonly texts: any[] = [];
  readonly binaries: Buffer[] = [];
  /** Every message in arrival order: parsed JSON for text, Buffer for binary. */
  readonly all: Array<any> = [];
  closed: { code: number; reason: string } | null = null;
  private waiters: Array<() => void> = [];
  readonly closedP: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      const buf = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      if (isBinary) {
        this.binaries.push(buf);
        this.all.push(buf);
      } else {
        const j = JSON.parse(buf.toString('utf8'));
        this.texts.push(j);
        this.all.push(j);
      }
      this.wake();
    });
    this.closedP = new Promise((resolve) => {
      ws.once('close', (code, reason) => {
        this.closed = { code, reason: reason.toString() };
        this.wake();
        resolve(this.closed);
      });
    });
    ws.on('error', () => {});
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Resolves once `pred` holds; rejects if the socket closes first or after `ms` (a hang guard, not a timing check). */
  waitFor<T>(pred: () => T | undefined | null | false, what = 'condition', ms = 20_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const guard = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
      const check = () => {
        const v = pred();
        if (v) {
          clearTimeout(guard);
          resolve(v);
          return;
        }
        if (this.closed) {
          clearTimeout(guard);
          reject(new Error(`socket closed (${this.closed.code} ${this.closed.reason}) while waiting for ${what}`));
          return;
        }
        this.waiters.push(check);
      };
      check();
    });
  }

  text(type: string): any[] {
    return this.texts.filter((m) => m.type === type);
  }

  sendJson(m: unknown): void {
    this.ws.send(JSON.stringify(m));
  }

  close(): Promise<{ code: number; reason: string }> {
    if (!this.closed) this.ws.close();
    return this.closedP;
  }
}

/** Open a channel; resolves with a client, or with the HTTP refusal (status + parsed envelope). */
export function connect(url: string, headers: Record<string, string> = {}): Promise<WsClient | Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    // Register before 'open': the server may send its first message right after the handshake.
    const client = new WsClient(ws);
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let body: any = null;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = Buffer.concat(chunks).toString('utf8');
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    ws.once('error', (e) => reject(e));
  });
}

export async function open(url: string, headers: Record<string, string> = {}): Promise<WsClient> {
  const r = await connect(url, headers);
  if (!(r instanceof WsClient)) throw new Error(`refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r;
}

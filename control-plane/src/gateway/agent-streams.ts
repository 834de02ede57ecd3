/**
 * Long-lived HTTP/2 streams to guest agents (screen stream, terminal attach): one HTTP/2 session per
 * machine over the substrate's channel, shared by every gateway stream of that machine and redialed
 * when it dies. Separate from the request pool because the pool buffers whole answers.
 */
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { AppError } from '../../../shared/errors.js';
import type { OpenedStream } from './deps.js';

export interface AgentStreamDialerOptions {
  openChannel: (machineId: string) => Promise<Duplex>;
  /**
   * Use an HTTP/2 session someone else owns instead of dialing one (e.g. the AgentPool's): needed where
   * the channel takes one client at a time (QEMU's virtio-serial chardev).
   */
  session?: (machineId: string) => Promise<http2.ClientHttp2Session>;
  /** Deadline for dialing and for an opened stream's response headers. */
  timeoutMs?: number;
}

function unavailable(message: string, cause?: unknown): AppError {
  return new AppError('compute_unavailable', message, { headers: { 'retry-after': '1' }, cause });
}

export class AgentStreamDialer {
  private readonly sessions = new Map<string, Promise<http2.ClientHttp2Session>>();
  private readonly timeoutMs: number;
  private closed = false;

  constructor(private readonly opts: AgentStreamDialerOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  private dial(machineId: string): Promise<http2.ClientHttp2Session> {
    const p = (async () => {
      let channel: Duplex;
      try {
        channel = await this.opts.openChannel(machineId);
      } catch (e) {
        throw e instanceof AppError ? e : unavailable('The machine is not reachable.', e);
      }
      // Screen frames are hundreds of KB: a large window keeps HTTP/2 flow control from pacing them.
      const s = http2.connect('http://agent', { createConnection: () => channel as never, settings: { initialWindowSize: 8 * 1024 * 1024 } });
      s.on('error', () => {});
      s.once('connect', () => {
        try {
          s.setLocalWindowSize(32 * 1024 * 1024);
        } catch {
          /* closed already */
        }
      });
      const forget = () => {
        if (this.sessions.get(machineId) === p) this.sessions.delete(machineId);
      };
      s.on('close', forget);
      s.on('goaway', forget);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          s.destroy();
          reject(unavailable('The machine agent did not answer in time.'));
        }, this.timeoutMs);
        timer.unref();
        s.once('remoteSettings', () => {
          clearTimeout(timer);
          resolve();
        });
        s.once('close', () => {
          clearTimeout(timer);
          reject(unavailable('The machine agent closed the connection.'));
        });
      });
      return s;
    })();
    this.sessions.set(machineId, p);
    p.catch(() => {
      if (this.sessions.get(machineId) === p) this.sessions.delete(machineId);
    });
    return p;
  }

  private async session(machineId: string): Promise<http2.ClientHttp2Session> {
    if (this.closed) throw unavailable('The control plane is shutting down.');
    if (this.opts.session) return this.opts.session(machineId);
    const existing = this.sessions.get(machineId);
    if (existing) {
      const s = await existing.catch(() => null);
      if (s && !s.closed && !s.destroyed) return s;
      if (this.sessions.get(machineId) === existing) this.sessions.delete(machineId);
    }
    return this.dial(machineId);
  }

  /** Opens one stream with the machine's bearer token; resolves when the agent's response headers arrive. */
  async open(machineId: string, token: string, req: { method: 'GET' | 'POST'; path: string; duplex: boolean }): Promise<OpenedStream> {
    const s = await this.session(machineId);
    let stream: http2.ClientHttp2Stream;
    try {
      const headers: http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, authorization: `Bearer ${token}` };
      if (req.duplex) headers['content-type'] = 'application/octet-stream';
      stream = s.request(headers, { endStream: !req.duplex });
    } catch (e) {
      this.drop(machineId);
      throw unavailable('The machine agent connection failed.', e);
    }
    stream.on('error', () => {});
    return new Promise<OpenedStream>((resolve, reject) => {
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(unavailable('The machine agent did not answer in time.'));
      }, this.timeoutMs);
      timer.unref();
      stream.once('response', (headers) => {
        clearTimeout(timer);
        resolve({ status: Number(headers[':status']), headers, stream });
      });
      stream.once('close', () => {
        clearTimeout(timer);
        reject(unavailable('The machine agent closed the stream without answering.'));
      });
    });
  }

  /** Forget (and close) the machine's session. A borrowed session is left to its owner. */
  drop(machineId: string): void {
    const p = this.sessions.get(machineId);
    if (!p) return;
    this.sessions.delete(machineId);
    p.then((s) => s.destroy(), () => {});
  }

  close(): void {
    this.closed = true;
    for (const id of [...this.sessions.keys()]) this.drop(id);
  }
}

/** Reads an agent error answer's body (small) and turns it into an AppError-like code and message. */
export async function readAgentError(o: OpenedStream): Promise<{ code: string; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve) => {
    o.stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 65536) chunks.push(c);
    });
    o.stream.once('end', resolve);
    o.stream.once('close', resolve);
  });
  try {
    const j = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
    if (typeof j.error?.code === 'string') return { code: j.error.code, message: typeof j.error.message === 'string' ? j.error.message : '' };
  } catch {
    /* not an envelope */
  }
  return { code: o.status === 401 ? 'compute_unavailable' : 'internal_error', message: 'The machine agent refused the stream.' };
}

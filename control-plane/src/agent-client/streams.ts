/**
 * Long-lived HTTP/2 streams to guest agents (screen stream, terminal attach). They run on the machine's
 * one HTTP/2 session, which the AgentPool dials and owns: a VM's virtio-serial chardev takes a single
 * host connection, so the gateway never dials its own. Separate from pool.request because that buffers
 * whole answers.
 */
import http2 from 'node:http2';
import type { AgentOperation } from '../../../shared/agent-protocol.js';
import { AppError, type ErrorCode } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { readAgentAnswer } from './answer.js';

/** A long-lived agent stream (screen frames, terminal attach, TCP), after its response headers arrived. */
export interface OpenedStream {
  status: number;
  headers: http2.IncomingHttpHeaders;
  stream: http2.ClientHttp2Stream;
}

export interface AgentStreamDialerOptions {
  /** The machine's HTTP/2 session, enrolled with the agent key (AgentPool.session). */
  session: (machineId: string, key: string) => Promise<http2.ClientHttp2Session>;
  /** Tell the session's owner that its session failed (AgentPool.drop). */
  drop?: (machineId: string) => void;
  /** Deadline for an opened stream's response headers. */
  timeoutMs?: number;
}

export class AgentStreamDialer {
  private readonly timeoutMs: number;
  private closed = false;

  constructor(private readonly opts: AgentStreamDialerOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  private session(machineId: string, key: string): Promise<http2.ClientHttp2Session> {
    if (this.closed) return Promise.reject(ERRORS.agentUnreachable('The control plane is shutting down.'));
    return this.opts.session(machineId, key);
  }

  /** Opens one stream with the machine's bearer token; resolves when the agent's response headers arrive. */
  async open(machineId: string, token: string, req: { method: 'GET' | 'POST'; path: string; duplex: boolean }): Promise<OpenedStream> {
    const s = await this.session(machineId, token);
    let stream: http2.ClientHttp2Stream;
    try {
      const headers: http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, authorization: `Bearer ${token}` };
      if (req.duplex) headers['content-type'] = 'application/octet-stream';
      stream = s.request(headers, { endStream: !req.duplex });
    } catch (e) {
      this.drop(machineId);
      throw ERRORS.agentUnreachable('The machine agent connection failed.', e);
    }
    stream.on('error', () => {});
    return new Promise<OpenedStream>((resolve, reject) => {
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(ERRORS.agentUnreachable('The machine agent did not answer in time.'));
      }, this.timeoutMs);
      timer.unref();
      stream.once('response', (headers) => {
        clearTimeout(timer);
        resolve({ status: Number(headers[':status']), headers, stream });
      });
      stream.once('close', () => {
        clearTimeout(timer);
        reject(ERRORS.agentUnreachable('The machine agent closed the stream without answering.'));
      });
    });
  }

  /** The machine's session failed under a stream: its owner redials on next use. */
  drop(machineId: string): void {
    this.opts.drop?.(machineId);
  }

  close(): void {
    this.closed = true;
  }
}

/** Most of an agent's error answer on a stream that is read; past it the stream is cancelled. */
const MAX_ERROR_BODY = 64 * 1024;
const ERROR_BODY_DEADLINE_MS = 5_000;

/**
 * Reads an agent's refusal of a stream (small, bounded in size and time: a replaced agent may send
 * an endless or huge body) and parses it like any agent answer.
 */
export async function readAgentError(o: OpenedStream, op: AgentOperation): Promise<{ code: ErrorCode; message: string }> {
  const body = await new Promise<Buffer>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (cancel: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (cancel) o.stream.close(http2.constants.NGHTTP2_CANCEL);
      resolve(Buffer.concat(chunks));
    };
    const timer = setTimeout(() => finish(true), ERROR_BODY_DEADLINE_MS);
    timer.unref();
    o.stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_ERROR_BODY) {
        chunks.length = 0;
        return finish(true);
      }
      chunks.push(c);
    });
    o.stream.once('end', () => finish(false));
    o.stream.once('close', () => finish(false));
  });
  try {
    readAgentAnswer(op, { status: o.status, body });
  } catch (e) {
    if (e instanceof AppError) return { code: e.code, message: e.message };
  }
  return { code: 'compute_unavailable', message: 'The machine agent refused the stream.' };
}

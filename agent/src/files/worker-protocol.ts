/**
 * The pipe between the agent and its files worker (files/worker.ts, running as the `agent` user):
 * frames of `[u32 big-endian length][JSON]` on the worker's stdin (requests) and stdout (answers).
 *
 * Trust: the worker runs as the unprivileged user, so a process of that user may tamper with it
 * (ptrace). Its answers are therefore parsed like any untrusted input: bounded frames, schemas for
 * every value, error codes from the spec's vocabulary only. A lying worker can only lie about what the
 * agent user may see anyway.
 */
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../../../shared/errors.js';
import { GuestUser } from '../../../shared/schemas/common.js';
import { FileEncoding, MAX_READ_RANGE, WriteBody } from '../../../shared/schemas/files.js';

/** A write request carries up to MAX_WRITE_BODY_BYTES of JSON; an answer at most a 4 MB range in base64. */
export const MAX_WORKER_FRAME = 64 * 1024 * 1024;

/** ReadQuery after parsing (numbers, not query strings). */
const ParsedReadQuery = z.object({
  path: z.string(),
  offset: z.number().int().min(0),
  length: z.number().int().min(1).max(MAX_READ_RANGE),
  encoding: FileEncoding,
  user: GuestUser,
});

export const WorkerRequest = z.discriminatedUnion('op', [
  z.object({ id: z.number().int(), op: z.literal('list'), path: z.string() }),
  z.object({ id: z.number().int(), op: z.literal('read'), query: ParsedReadQuery }),
  z.object({ id: z.number().int(), op: z.literal('write'), path: z.string(), body: WriteBody }),
]);
export type WorkerRequest = z.infer<typeof WorkerRequest>;

const WorkerError = z.object({
  code: z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]),
  message: z.string().max(4096),
  details: z.array(z.object({ field: z.string().max(256), message: z.string().max(1024) })).max(32),
});

export const WorkerAnswer = z.union([
  /** The value is parsed by the caller against the schema of the operation it asked for. */
  z.object({ id: z.number().int(), ok: z.literal(true), value: z.unknown() }),
  z.object({ id: z.number().int(), ok: z.literal(false), error: WorkerError }),
  /** Anything but an AppError: only its kind (an errno code or error name), never its message. */
  z.object({ id: z.number().int(), ok: z.literal(false), internal: z.string().max(64) }),
]);
export type WorkerAnswer = z.infer<typeof WorkerAnswer>;

export function encodeFrame(msg: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(msg), 'utf8');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(json.length, 0);
  return Buffer.concat([head, json]);
}

/** Splits a byte stream into frames; throws on a frame over MAX_WORKER_FRAME (the stream is then dead). */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private size = 0;

  push(chunk: Buffer): unknown[] {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const out: unknown[] = [];
    for (;;) {
      if (this.size < 4) break;
      let buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      const len = buf.readUInt32BE(0);
      if (len > MAX_WORKER_FRAME) throw new Error('worker frame too large');
      if (buf.length < 4 + len) {
        this.chunks = [buf];
        break;
      }
      out.push(JSON.parse(buf.subarray(4, 4 + len).toString('utf8')));
      buf = buf.subarray(4 + len);
      this.chunks = buf.length ? [buf] : [];
      this.size = buf.length;
    }
    return out;
  }
}

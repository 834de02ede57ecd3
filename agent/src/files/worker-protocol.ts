/**
 * The pipe between the agent and its files worker (files/worker.ts, running as the `agent` user):
 * frames of `[u32 BE header length][u32 BE payload length][header JSON][payload bytes]` on the worker's
 * stdin (requests) and stdout (answers). File bytes travel as the payload, never inside JSON: a 4 MB
 * range as a JSON string cost ~45 ms to stringify and parse, ten times the read itself.
 *
 * Trust: the worker runs as the unprivileged user, so a process of that user may tamper with it
 * (ptrace). Its answers are therefore parsed like any untrusted input: bounded frames, schemas for
 * every value, error codes from the spec's vocabulary only. A lying worker can only lie about what the
 * agent user may see anyway.
 */
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../../../shared/errors.js';
import { GuestUser } from '../../../shared/schemas/common.js';
import { FileMode, MAX_READ_RANGE, MAX_WRITE_BYTES } from '../../../shared/schemas/files.js';

export const MAX_WORKER_HEADER = 1024 * 1024;
/** The largest payload: a write's decoded content (a read's range is smaller). */
export const MAX_WORKER_PAYLOAD = MAX_WRITE_BYTES;

export const WorkerRequest = z.discriminatedUnion('op', [
  z.object({ id: z.number().int(), op: z.literal('list'), path: z.string() }),
  z.object({ id: z.number().int(), op: z.literal('range'), path: z.string(), offset: z.number().int().min(0), length: z.number().int().min(1).max(MAX_READ_RANGE) }),
  /** The content is the frame's payload. */
  z.object({
    id: z.number().int(),
    op: z.literal('write'),
    path: z.string(),
    opts: z.object({ append: z.boolean(), createDirs: z.boolean(), mode: FileMode.optional(), user: GuestUser }),
  }),
]);
export type WorkerRequest = z.infer<typeof WorkerRequest>;

const WorkerError = z.object({
  code: z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]),
  message: z.string().max(4096),
  details: z.array(z.object({ field: z.string().max(256), message: z.string().max(1024) })).max(32),
});

/** What a range answer carries besides its bytes (the payload). */
export const RangeMeta = z.object({ size: z.number().int().min(0), eof: z.boolean() });

export const WorkerAnswer = z.union([
  /** The value is parsed by the caller against the schema of the operation it asked for. */
  z.object({ id: z.number().int(), ok: z.literal(true), value: z.unknown() }),
  z.object({ id: z.number().int(), ok: z.literal(false), error: WorkerError }),
  /** Anything but an AppError: only its kind (an errno code or error name), never its message. */
  z.object({ id: z.number().int(), ok: z.literal(false), internal: z.string().max(64) }),
]);
export type WorkerAnswer = z.infer<typeof WorkerAnswer>;

export interface Frame {
  header: unknown;
  payload: Buffer;
}

export function encodeFrame(header: unknown, payload: Buffer = Buffer.alloc(0)): Buffer[] {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const head = Buffer.alloc(8);
  head.writeUInt32BE(json.length, 0);
  head.writeUInt32BE(payload.length, 4);
  return [head, json, payload];
}

/**
 * Splits a byte stream into frames; throws on a frame over the bounds (the stream is then dead).
 * Chunks are joined once per frame, when it is complete (a pipe delivers a 32 MB frame in ~500 chunks).
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Header and payload lengths of the frame being collected, once its prefix is in. */
  private lens: [number, number] | null = null;

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const out: Frame[] = [];
    for (;;) {
      if (!this.lens) {
        if (this.size < 8) break;
        const head = this.chunks[0]!.length >= 8 ? this.chunks[0]! : Buffer.concat(this.chunks);
        this.lens = [head.readUInt32BE(0), head.readUInt32BE(4)];
        if (this.lens[0] > MAX_WORKER_HEADER || this.lens[1] > MAX_WORKER_PAYLOAD) throw new Error('worker frame too large');
      }
      const [h, p] = this.lens;
      if (this.size < 8 + h + p) break;
      const buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      out.push({ header: JSON.parse(buf.subarray(8, 8 + h).toString('utf8')), payload: buf.subarray(8 + h, 8 + h + p) });
      const rest = buf.subarray(8 + h + p);
      this.chunks = rest.length ? [rest] : [];
      this.size = rest.length;
      this.lens = null;
    }
    return out;
  }
}

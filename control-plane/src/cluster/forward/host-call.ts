/**
 * The calling side of a host-to-host call (docs/cluster.md, "Host-to-host calls"): a request of this process's own
 * to another process of the deployment, signed with a host assertion (assertion.ts `HostCallAssertion`) on the
 * forwarder's pool and connect deadline. A 200's body is handed back as it streams (a layer can be gigabytes); any
 * other answer is read (bounded) and thrown as a named error: the other process's envelope as it wrote it, or
 * `hostCallGarbled` for anything else. A target that cannot be reached, or an answer cut short, is
 * `hostCallUnreachable` (the body's stream is destroyed with it). `postJson` sends a small JSON body (at most
 * MAX_BODY_BYTES; the body is not signed, as a forwarded request's is not: docs/cluster.md) and reads the answer as
 * `getJson` does. Every call is its request's own: the caller retries (a drain's step is idempotent), never this.
 */
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../../../../shared/errors.js';
import { newId } from '../../../../shared/ids.js';
import { ERRORS } from '../../errors.js';
import type { Forwarder } from './forwarder.js';
import type { RemoteOwner } from './owner.js';

/** An error or JSON answer is read up to this many bytes (an envelope, a layer chain: far smaller). */
const MAX_ANSWER_BYTES = 64 * 1024;
/** A posted JSON body is at most this many bytes (a move's step names a host and a layer: far smaller). */
export const MAX_BODY_BYTES = 16 * 1024;

const Envelope = z.object({
  error: z.object({
    code: z.string().refine((c): c is ErrorCode => (ERROR_CODES as string[]).includes(c)),
    message: z.string().max(2000),
  }),
});

export interface HostCalls {
  /** GET `path` on `target`; resolves with the 200 answer's body stream (the caller reads or destroys it). */
  get(target: RemoteOwner, path: string): Promise<IncomingMessage>;
  /** GET `path` on `target`, its 200 answer read whole (at most 64 KiB) and parsed by `schema`. */
  getJson<T>(target: RemoteOwner, path: string, schema: z.ZodType<T>): Promise<T>;
  /** POST `body` as JSON (at most MAX_BODY_BYTES) to `path` on `target`; its 200 answer read as getJson reads it. */
  postJson<T>(target: RemoteOwner, path: string, body: unknown, schema: z.ZodType<T>): Promise<T>;
}

/** An answer's JSON, read to at most MAX_ANSWER_BYTES; undefined when it is longer or not JSON. */
async function boundedJson(res: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > MAX_ANSWER_BYTES) {
      res.destroy();
      return undefined;
    }
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

async function refusal(res: IncomingMessage): Promise<Error> {
  const e = Envelope.safeParse(await boundedJson(res));
  return e.success ? ERRORS.hostCallRefused(e.data.error.code, e.data.error.message) : ERRORS.hostCallGarbled(res.statusCode ?? 0);
}

/** Host-to-host calls from this process, whose host is `hostId`, over `forwarder`'s pools. */
export function createHostCalls(forwarder: Pick<Forwarder, 'open'>, hostId: string): HostCalls {
  /** One signed request with `body` (none: a GET); resolves with the 200 answer's stream, else rejects named. */
  const send = (target: RemoteOwner, path: string, body: Buffer | null) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      const assertion = { on_behalf_of: { kind: 'host' as const, host_id: hostId }, request_id: newId('request') };
      const headers = body ? ['Content-Type', 'application/json', 'Content-Length', String(body.length)] : [];
      let req;
      try {
        req = forwarder.open(target, { method: body ? 'POST' : 'GET', path, assertion, headers });
      } catch {
        reject(ERRORS.hostCallUnreachable());
        return;
      }
      req.on('error', () => reject(ERRORS.hostCallUnreachable()));
      req.on('response', (res) => {
        if (res.statusCode === 200) {
          // Cut short after the head: the body's reader sees the stream fail, never a clean end.
          res.on('aborted', () => res.destroy(ERRORS.hostCallUnreachable()));
          resolve(res);
        } else {
          refusal(res).then(reject, () => reject(ERRORS.hostCallUnreachable()));
        }
      });
      req.end(body ?? undefined);
    });
  const json = async <T>(res: IncomingMessage, schema: z.ZodType<T>): Promise<T> => {
    const parsed = schema.safeParse(await boundedJson(res).catch(() => undefined));
    if (!parsed.success) throw ERRORS.hostCallGarbled(200);
    return parsed.data;
  };
  return {
    get: (target, path) => send(target, path, null),
    getJson: async (target, path, schema) => json(await send(target, path, null), schema),
    async postJson(target, path, body, schema) {
      const bytes = Buffer.from(JSON.stringify(body) ?? 'null', 'utf8');
      if (bytes.length > MAX_BODY_BYTES) throw ERRORS.hostCallBodyTooLarge(MAX_BODY_BYTES);
      return json(await send(target, path, bytes), schema);
    },
  };
}

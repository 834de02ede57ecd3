/** A full-duplex attach stream to an agent terminal, as the gateway opens it. */
import type http2 from 'node:http2';
import type { H2Client } from './h2-client.js';

export interface AttachStream {
  /** Resolves with the response headers (status included). */
  response: Promise<http2.IncomingHttpHeaders>;
  /** Everything received so far. */
  output(): Buffer;
  /** Resolve once the received bytes satisfy `pred` (rejects if the stream ends first). */
  waitFor(pred: (out: Buffer) => boolean): Promise<Buffer>;
  write(b: Buffer | string): void;
  /** Close our side completely (detach). */
  close(): void;
  /** Resolves when the stream is over, with trailers (if any). */
  ended: Promise<{ trailers: http2.IncomingHttpHeaders | null }>;
  body(): Buffer;
}

export function openAttach(client: H2Client, token: string, id: string): AttachStream {
  const req = client.session.request(
    { ':method': 'POST', ':path': `/terminals/${id}/attach`, authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
    { endStream: false },
  );
  const chunks: Buffer[] = [];
  let size = 0;
  let cache: Buffer | null = null;
  const out = () => {
    if (!cache || cache.length !== size) cache = Buffer.concat(chunks);
    return cache;
  };
  let waiters: Array<{ pred: (b: Buffer) => boolean; resolve: (b: Buffer) => void; reject: (e: Error) => void }> = [];
  let done = false;
  let trailers: http2.IncomingHttpHeaders | null = null;
  const check = () => {
    const b = out();
    waiters = waiters.filter((w) => {
      if (w.pred(b)) {
        w.resolve(b);
        return false;
      }
      if (done) {
        w.reject(new Error('stream ended before the expected output: ' + JSON.stringify(b.toString('latin1').slice(-300))));
        return false;
      }
      return true;
    });
  };
  const response = new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
    // Not a timing check: a guard so a stream that can never start fails the test instead of hanging it
    // (e.g. a body-buffering middleware in front of the attach route).
    const guard = setTimeout(() => reject(new Error('attach: no response headers after 15 s (is the request body being buffered before the route?)')), 15_000);
    req.once('response', (h) => {
      clearTimeout(guard);
      resolve(h);
    });
    req.once('error', (e) => {
      clearTimeout(guard);
      reject(e);
    });
    req.once('close', () => clearTimeout(guard));
  });
  let failure: Error | null = null;
  response.catch((e: Error) => {
    failure = e;
    done = true;
    for (const w of waiters) w.reject(e);
    waiters = [];
    req.close();
  });
  req.on('data', (d: Buffer) => {
    chunks.push(d);
    size += d.length;
    check();
  });
  req.on('trailers', (h) => (trailers = h));
  req.on('error', () => {});
  // The answer is over (pty exited): end our half too, as the gateway does.
  req.on('end', () => req.end());
  const ended = new Promise<{ trailers: http2.IncomingHttpHeaders | null }>((resolve) => {
    req.once('close', () => {
      done = true;
      check();
      resolve({ trailers });
    });
  });
  return {
    response,
    output: out,
    body: out,
    waitFor: (pred) =>
      new Promise((resolve, reject) => {
        if (failure) return reject(failure);
        waiters.push({ pred, resolve, reject });
        check();
      }),
    write: (b) => {
      req.write(b);
    },
    close: () => req.close(),
    ended,
  };
}

/**
 * One HTTP/1.1 exchange with the guest over an agent TCP stream: the request head is written as bytes
 * (guest-request.ts; the caller writes the body after it), the answer is parsed strictly
 * (guest-response.ts) and handed over as events, with backpressure: a `body` handler that returns false
 * pauses the stream until `resume()`. The answer's head must start within the deadline.
 */
import http2 from 'node:http2';
import { GuestResponseParser, type GuestEvent, type GuestHead } from './guest-response.js';

export interface ExchangeHandlers {
  /** The final head (`upgraded`: a 101 to an upgrade; what follows is the raw byte pipe). */
  head(head: GuestHead, upgraded: boolean): void;
  /** Body bytes, or after an upgrade every byte; false = the client is full, pause until resume(). */
  body(data: Buffer): boolean;
  end(): void;
  /** No usable answer: malformed, cut short, none in time, or the stream failed. Called at most once. */
  fail(): void;
}

export interface Exchange {
  resume(): void;
  /** Stop listening and cancel the stream (the client went away, or the exchange is over). */
  cancel(): void;
}

export function startExchange(
  stream: http2.ClientHttp2Stream,
  o: { head: Buffer; method: string; upgrade: boolean; headerTimeoutMs: number },
  on: ExchangeHandlers,
): Exchange {
  const parser = new GuestResponseParser({ method: o.method, upgrade: o.upgrade });
  let over = false;
  let headSeen = false;
  const timer = setTimeout(() => finish(true), o.headerTimeoutMs);
  timer.unref();

  function finish(failed: boolean): void {
    if (over) return;
    over = true;
    clearTimeout(timer);
    stream.off('data', onData);
    if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
    if (failed) on.fail();
  }

  function deliver(events: GuestEvent[]): void {
    for (const ev of events) {
      if (over) return;
      if (ev.kind === 'head') {
        headSeen = true;
        clearTimeout(timer);
        on.head(ev.head, ev.upgraded);
      } else if (ev.kind === 'body') {
        if (!on.body(ev.data)) stream.pause();
      } else {
        on.end();
        finish(false);
      }
    }
  }

  function step(read: () => GuestEvent[]): void {
    let events: GuestEvent[];
    try {
      events = read();
    } catch {
      return finish(true);
    }
    deliver(events);
  }

  const onData = (chunk: Buffer) => step(() => parser.push(chunk));
  stream.on('data', onData);
  stream.once('end', () => step(() => parser.eof()));
  // Reset (the guest's connection was reset, the agent went away) before the answer was complete.
  stream.once('close', () => finish(!parser.done || !headSeen));
  stream.on('error', () => {});
  stream.write(o.head);

  return {
    resume: () => {
      if (!over) stream.resume();
    },
    cancel: () => finish(false),
  };
}

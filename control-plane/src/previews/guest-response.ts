/**
 * The guest's HTTP/1.1 answer to a preview request, parsed incrementally (pure). The guest is hostile, so
 * the parser is strict and bounded: one head of at most 16 KiB (informational heads count towards it),
 * CRLF line ends only, no folded lines, no whitespace before a colon, no control characters in values;
 * the body is framed by exactly one of `Transfer-Encoding: chunked` (no other coding) or one
 * `Content-Length` (repeats must agree), both at once is an error (RFC 9112 §6.3), neither reads to the
 * end of the connection (the proxy sends `Connection: close`). Anything after the body is dropped: each
 * request has its own connection, so nothing can be smuggled into the next. A `101` is an answer only to
 * an upgrade; to a plain request it is an error (the client would otherwise wait forever).
 */

/** The most a head may take, with the informational heads before it (Node's own default, 16 KiB). */
export const MAX_GUEST_HEAD_BYTES = 16 * 1024;
/** A chunk-size line with its extensions. */
const MAX_CHUNK_LINE_BYTES = 4 * 1024;
/** 13 hex digits: at most 2^52, exact as a number. */
const CHUNK_SIZE_LINE = /^([0-9A-Fa-f]{1,13})(?:[\t ]*;[\t\x20-\x7e\x80-\xff]*)?$/;
const STATUS_LINE = /^HTTP\/1\.[01] ([1-5]\d\d)(?: ([\t\x20-\x7e\x80-\xff]*))?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const CRLF = Buffer.from('\r\n', 'latin1');
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

export interface GuestHead {
  status: number;
  reason: string;
  /** [name, value, …] as sent (latin1), in order. */
  rawHeaders: string[];
}

export type GuestEvent =
  | { kind: 'head'; head: GuestHead; upgraded: boolean }
  /** Body bytes (after an upgrade: the raw bytes that followed the 101 in the same read). */
  | { kind: 'body'; data: Buffer }
  | { kind: 'end' };

/** The answer is not one the proxy passes on; `reason` is for tests and logs, never shown to the client. */
export class GuestAnswerError extends Error {
  constructor(readonly reason: string) {
    super(`bad guest answer: ${reason}`);
    this.name = 'GuestAnswerError';
  }
}

type State =
  | { kind: 'head' }
  | { kind: 'length'; left: number }
  | { kind: 'chunk-size' }
  | { kind: 'chunk-data'; left: number }
  | { kind: 'chunk-end' }
  | { kind: 'trailers' }
  | { kind: 'close' }
  | { kind: 'upgraded' }
  | { kind: 'done' };

function fail(reason: string): never {
  throw new GuestAnswerError(reason);
}

function parseHead(text: string): GuestHead {
  const lines = text.split('\r\n');
  const m = STATUS_LINE.exec(lines[0]!);
  if (!m) fail('status line');
  const rawHeaders: string[] = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    // A leading space or tab (obs-fold) or one before the colon fails the token test.
    if (!TOKEN.test(name)) fail('header name');
    const value = line.slice(colon + 1).replace(/^[\t ]+|[\t ]+$/g, '');
    if (!FIELD_VALUE.test(value)) fail('header value');
    rawHeaders.push(name, value);
  }
  return { status: Number(m[1]), reason: m[2] ?? '', rawHeaders };
}

/** How the body of a final answer is framed (RFC 9112 §6.3, strictly). */
function bodyState(head: GuestHead, method: string): State {
  if (method === 'HEAD' || head.status === 204 || head.status === 304) return { kind: 'done' };
  // Every list item counts, empty ones too: `Transfer-Encoding:` alone or `chunked,` is not `chunked`.
  const te: string[] = [];
  const cl: string[] = [];
  for (let i = 0; i < head.rawHeaders.length; i += 2) {
    const name = head.rawHeaders[i]!.toLowerCase();
    const items = head.rawHeaders[i + 1]!.split(',').map((s) => s.trim());
    if (name === 'transfer-encoding') te.push(...items.map((s) => s.toLowerCase()));
    if (name === 'content-length') cl.push(...items);
  }
  if (te.length && cl.length) fail('both transfer-encoding and content-length');
  if (te.length) return te.length === 1 && te[0] === 'chunked' ? { kind: 'chunk-size' } : fail('transfer-encoding');
  if (cl.length) {
    if (!cl.every((v) => /^\d{1,15}$/.test(v) && v === cl[0])) fail('content-length');
    const left = Number(cl[0]);
    return left === 0 ? { kind: 'done' } : { kind: 'length', left };
  }
  return { kind: 'close' };
}

export class GuestResponseParser {
  private state: State = { kind: 'head' };
  private pending: Buffer = Buffer.alloc(0);
  private headBytes = 0;

  /** `method` of the request (a HEAD answer has no body); `upgrade`: the request asked to switch. */
  constructor(private readonly o: { method: string; upgrade: boolean }) {}

  get done(): boolean {
    return this.state.kind === 'done';
  }

  /** The events `chunk` completes; throws GuestAnswerError. */
  push(chunk: Buffer): GuestEvent[] {
    const out: GuestEvent[] = [];
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    while (buf.length && this.state.kind !== 'done') {
      const s = this.state;
      switch (s.kind) {
        case 'head': {
          const end = buf.indexOf(HEAD_END);
          if (this.headBytes + (end < 0 ? buf.length : end + HEAD_END.length) > MAX_GUEST_HEAD_BYTES) fail('head too large');
          if (end < 0) return this.keep(buf, out);
          this.headBytes += end + HEAD_END.length;
          const head = parseHead(buf.subarray(0, end).toString('latin1'));
          buf = buf.subarray(end + HEAD_END.length);
          this.onHead(head, out);
          break;
        }
        case 'length':
        case 'chunk-data': {
          const n = Math.min(s.left, buf.length);
          out.push({ kind: 'body', data: buf.subarray(0, n) });
          buf = buf.subarray(n);
          s.left -= n;
          if (s.left === 0) this.state = s.kind === 'length' ? this.end(out) : { kind: 'chunk-end' };
          break;
        }
        case 'chunk-size':
        case 'trailers': {
          const eol = buf.indexOf(CRLF);
          const limit = s.kind === 'chunk-size' ? MAX_CHUNK_LINE_BYTES : MAX_GUEST_HEAD_BYTES - this.headBytes;
          if ((eol < 0 ? buf.length : eol) > limit) fail(`${s.kind} line too long`);
          if (eol < 0) return this.keep(buf, out);
          const line = buf.subarray(0, eol).toString('latin1');
          buf = buf.subarray(eol + CRLF.length);
          if (s.kind === 'trailers') {
            // Trailers are read (bounded with the head) and dropped: headers already went out.
            this.headBytes += eol + CRLF.length;
            if (line === '') this.state = this.end(out);
            break;
          }
          const m = CHUNK_SIZE_LINE.exec(line) ?? fail('chunk size');
          const size = parseInt(m[1]!, 16);
          this.state = size === 0 ? { kind: 'trailers' } : { kind: 'chunk-data', left: size };
          break;
        }
        case 'chunk-end': {
          if (buf.length < CRLF.length) return this.keep(buf, out);
          if (!buf.subarray(0, CRLF.length).equals(CRLF)) fail('chunk end');
          buf = buf.subarray(CRLF.length);
          this.state = { kind: 'chunk-size' };
          break;
        }
        case 'close':
        case 'upgraded':
          out.push({ kind: 'body', data: buf });
          buf = buf.subarray(buf.length);
          break;
      }
    }
    return out;
  }

  /** The guest closed its side: the events that completes, or GuestAnswerError when the answer is cut. */
  eof(): GuestEvent[] {
    const k = this.state.kind;
    if (k === 'done') return [];
    if (k === 'close' || k === 'upgraded') {
      const out: GuestEvent[] = [];
      this.state = this.end(out);
      return out;
    }
    return fail(k === 'head' ? 'no answer' : 'cut short');
  }

  private keep(buf: Buffer, out: GuestEvent[]): GuestEvent[] {
    this.pending = Buffer.from(buf);
    return out;
  }

  private end(out: GuestEvent[]): State {
    out.push({ kind: 'end' });
    return { kind: 'done' };
  }

  private onHead(head: GuestHead, out: GuestEvent[]): void {
    if (head.status === 101) {
      if (!this.o.upgrade) fail('101 to a plain request');
      out.push({ kind: 'head', head, upgraded: true });
      this.state = { kind: 'upgraded' };
      return;
    }
    // Informational answers (103 Early Hints, a stray 100) are dropped; the final one follows.
    if (head.status < 200) return;
    out.push({ kind: 'head', head, upgraded: false });
    const next = bodyState(head, this.o.method);
    this.state = next.kind === 'done' ? this.end(out) : next;
  }
}

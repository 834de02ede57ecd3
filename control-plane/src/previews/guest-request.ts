/**
 * The HTTP/1.1 request the preview proxy writes to the guest, serialized here (pure) as Buffers and
 * written to the agent's TCP stream directly. Node's `http.request` over an `Http2Stream`
 * (`createConnection`) wrote its head from a freed buffer when the body was small, so the guest received
 * 16 bytes of control-plane heap in place of the request line (docs/security.md, "Published ports").
 * Headers come from `requestHeadersForGuest` (domain/preview-headers.ts); the body is framed as the client framed it.
 */
import { invalid } from '../../../shared/errors.js';

/** RFC 9110 §5.6.2 token (methods, header names). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A request target: visible ASCII and obs-text, no space or control. */
const TARGET = /^[\x21-\x7e\x80-\xff]+$/;
/** A field value: HTAB, SP, VCHAR, obs-text; never CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** How the body follows the head: as the client sent it (a length), re-chunked, or none. */
export type BodyFraming = 'length' | 'chunked' | 'none';

/** From the headers forwarded to the guest: chunked when they say so, a length when they carry one. */
export function framingOf(headers: readonly string[]): BodyFraming {
  let framing: BodyFraming = 'none';
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i]!.toLowerCase();
    if (name === 'transfer-encoding') return 'chunked';
    if (name === 'content-length') framing = 'length';
  }
  return framing;
}

/**
 * `METHOD target HTTP/1.1`, the headers, the blank line, as latin1 bytes (Node's parser hands header
 * values over as latin1 strings). Node's server already refused anything malformed; what fails here is
 * refused again rather than written (a 400, never a split request).
 */
export function requestHead(method: string, target: string, headers: readonly string[]): Buffer {
  if (!TOKEN.test(method)) throw invalid('The request method is not valid.');
  if (!TARGET.test(target)) throw invalid('The request target is not valid.');
  const lines = [`${method} ${target} HTTP/1.1`];
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) throw invalid('A request header is not valid.');
    lines.push(`${name}: ${value}`);
  }
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

const CRLF = Buffer.from('\r\n', 'latin1');

/** One chunk of a chunked body (never empty: an empty chunk would end the body). */
export function chunkOf(data: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`, 'latin1'), data, CRLF]);
}

/** The end of a chunked body (no trailers: the client's were not forwarded). */
export const LAST_CHUNK = Buffer.from('0\r\n\r\n', 'latin1');

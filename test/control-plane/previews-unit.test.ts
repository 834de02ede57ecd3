/** Pure parts of the preview proxy: hostnames and the headers that cross it, pinned literally. */
import t from 'tap';
import { hostOnlyCookie, requestHeadersForGuest, responseHeadersFromGuest, withoutOurCookies } from '../../control-plane/src/domain/preview-headers.js';
import { DEFAULT_PREVIEW_LIMITS, PreviewAdmission } from '../../control-plane/src/previews/admission.js';
import { chunkOf, framingOf, LAST_CHUNK, requestHead } from '../../control-plane/src/previews/guest-request.js';
import { GuestAnswerError, GuestResponseParser, type GuestEvent } from '../../control-plane/src/previews/guest-response.js';
import { isPreviewHost, previewDomainOf, previewIdFromHost, previewOrigin } from '../../control-plane/src/domain/preview-hostnames.js';

const ID = 'prv_0123456789abcdefghijklmn';

t.test('preview domain', async (t) => {
  const local = 'http://127.0.0.1:8080';
  t.equal(previewDomainOf({ previewDomain: null, host: '127.0.0.1', publicBaseUrl: local }), 'localhost', 'loopback default');
  t.equal(previewDomainOf({ previewDomain: null, host: '::1', publicBaseUrl: 'http://[::1]:8080' }), 'localhost');
  t.equal(previewDomainOf({ previewDomain: null, host: 'localhost', publicBaseUrl: 'http://localhost:8080' }), 'localhost');
  t.equal(previewDomainOf({ previewDomain: null, host: '0.0.0.0', publicBaseUrl: 'http://0.0.0.0:8080' }), null, 'a public listener needs a domain');
  t.equal(previewDomainOf({ previewDomain: null, host: '127.0.0.1', publicBaseUrl: 'https://computer.example.com' }), null, 'so does a public URL in front of loopback');
  t.equal(previewDomainOf({ previewDomain: 'off', host: '127.0.0.1', publicBaseUrl: local }), null);
  t.equal(previewDomainOf({ previewDomain: '.Preview.Example.com.', host: '0.0.0.0', publicBaseUrl: local }), 'preview.example.com');
});

t.test('hostnames', async (t) => {
  t.equal(previewIdFromHost('prv-0123456789abcdefghijklmn.localhost:8080', 'localhost'), ID);
  t.equal(previewIdFromHost('PRV-0123456789ABCDEFGHIJKLMN.Preview.Example.com.', 'preview.example.com'), ID, 'case and a trailing dot');
  t.equal(previewIdFromHost('prv-0123456789abcdefghijklmn.localhost', 'example.com'), null);
  t.equal(previewIdFromHost('x.prv-0123456789abcdefghijklmn.localhost', 'localhost'), null, 'one label only');
  t.equal(previewIdFromHost('prv_0123456789abcdefghijklmn.localhost', 'localhost'), null, 'the underscore form is not a hostname');
  t.equal(previewIdFromHost('localhost:8080', 'localhost'), null);
  t.equal(previewIdFromHost(undefined, 'localhost'), null);
  t.equal(isPreviewHost('prv-bad.localhost:1', 'localhost'), true, 'a malformed preview label is still a preview host (404 page)');
  t.equal(isPreviewHost('api.localhost', 'localhost'), false, 'other names under the domain are the API');
  t.equal(isPreviewHost('127.0.0.1:8080', 'localhost'), false);
  t.equal(isPreviewHost('prv-0123456789abcdefghijklmn.localhost', null), false, 'previews off');
  t.equal(previewOrigin(ID, 'localhost', 'http://127.0.0.1:8080'), 'http://prv-0123456789abcdefghijklmn.localhost:8080');
  t.equal(previewOrigin(ID, 'p.example.com', 'https://computer.example.com/'), 'https://prv-0123456789abcdefghijklmn.p.example.com');
});

t.test('request headers for the guest', async (t) => {
  const fwd = { for: '203.0.113.9', proto: 'https', host: 'prv-x.p.example.com' };
  const raw = [
    'Host', 'prv-x.p.example.com', 'Connection', 'keep-alive, X-Hop', 'X-Hop', '1', 'Keep-Alive', 'timeout=5',
    'Authorization', 'Bearer prs_s', 'Cookie', 'a=1; computer_preview=c; computer_session=s; b=2', 'Transfer-Encoding', 'chunked',
    'X-Forwarded-For', '6.6.6.6', 'Forwarded', 'for=6.6.6.6', 'Accept', 'text/html', 'Accept', 'application/json', 'TE', 'trailers',
    'Proxy-Authorization', 'Basic x', 'Expect', '100-continue',
  ];
  t.same(requestHeadersForGuest(raw, { dropAuthorization: true, upgrade: false, forwarded: fwd }), [
    'Host', 'prv-x.p.example.com', 'Cookie', 'a=1; b=2', 'Accept', 'text/html', 'Accept', 'application/json',
    'Transfer-Encoding', 'chunked', 'Connection', 'close',
    'X-Forwarded-For', '203.0.113.9', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'prv-x.p.example.com',
  ]);
  t.same(
    requestHeadersForGuest(['Host', 'h', 'Connection', 'Upgrade', 'Upgrade', 'websocket', 'Authorization', 'Basic u', 'Cookie', 'computer_preview=c'], {
      dropAuthorization: false, upgrade: true, forwarded: fwd,
    }),
    ['Host', 'h', 'Authorization', 'Basic u', 'Connection', 'Upgrade', 'Upgrade', 'websocket',
      'X-Forwarded-For', '203.0.113.9', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'prv-x.p.example.com'],
    "an upgrade keeps Upgrade; the app's own Authorization passes when it is not our credential",
  );
  t.equal(withoutOurCookies('computer_preview=a; computer_session=b'), null);
});

t.test('response headers for the client', async (t) => {
  t.equal(hostOnlyCookie('a=1; Domain=example.com; Path=/; domain=.x; HttpOnly'), 'a=1; Path=/; HttpOnly');
  t.same(
    responseHeadersFromGuest(['Content-Type', 'text/plain', 'Connection', 'close', 'Transfer-Encoding', 'chunked', 'Set-Cookie', 's=1; Domain=localhost', 'Set-Cookie', 'computer_preview=x', 'Keep-Alive', 't=1']),
    ['Content-Type', 'text/plain', 'Set-Cookie', 's=1'],
  );
  t.same(responseHeadersFromGuest(['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Accept', 'k'], true), ['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Accept', 'k']);
});

t.test('the request head the proxy writes (bytes)', async (t) => {
  t.equal(
    requestHead('POST', '/a?b=1', ['Host', 'h', 'Content-Length', '3', 'X-Name', 'caf\u00e9']).toString('latin1'),
    'POST /a?b=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-Name: caf\u00e9\r\n\r\n',
  );
  t.throws(() => requestHead('GET', '/', ['X-A', 'a\r\nX-Injected: 1']), { code: 'invalid_request' }, 'no header splitting');
  t.throws(() => requestHead('GET', '/ HTTP/1.1\r\n', []), { code: 'invalid_request' }, 'no request-line splitting');
  t.throws(() => requestHead('GE T', '/', []), { code: 'invalid_request' });
  t.throws(() => requestHead('GET', '/', ['Bad Name', 'v']), { code: 'invalid_request' });
  t.equal(framingOf(['Host', 'h', 'Content-Length', '3']), 'length');
  t.equal(framingOf(['Content-Length', '3', 'Transfer-Encoding', 'chunked']), 'chunked');
  t.equal(framingOf(['Host', 'h']), 'none');
  t.equal(chunkOf(Buffer.from('0123456789abcdefX')).toString('latin1'), '11\r\n0123456789abcdefX\r\n');
  t.equal(LAST_CHUNK.toString('latin1'), '0\r\n\r\n');
});

/** Everything `answer` parses to, fed in pieces of `step` bytes, then EOF; or the error's reason. */
function parse(answer: string, o: { method?: string; upgrade?: boolean; step?: number } = {}): unknown[] | string {
  const p = new GuestResponseParser({ method: o.method ?? 'GET', upgrade: o.upgrade ?? false });
  const buf = Buffer.from(answer, 'latin1');
  const step = o.step ?? buf.length;
  const events: unknown[] = [];
  const show = (evs: GuestEvent[]) =>
    evs.forEach((e) => events.push(e.kind === 'head' ? ['head', e.head.status, e.head.reason, e.head.rawHeaders, e.upgraded] : e.kind === 'body' ? ['body', e.data.toString('latin1')] : ['end']));
  try {
    for (let i = 0; i < buf.length; i += step) show(p.push(buf.subarray(i, i + step)));
    show(p.eof());
  } catch (e) {
    if (e instanceof GuestAnswerError) return e.reason;
    throw e;
  }
  // Adjacent body pieces joined, so the result does not depend on the step.
  return events.reduce<unknown[]>((acc, e) => {
    const last = acc[acc.length - 1];
    if (Array.isArray(e) && e[0] === 'body' && Array.isArray(last) && last[0] === 'body') last[1] += e[1];
    else acc.push(e);
    return acc;
  }, []);
}

t.test("the guest's answer, parsed strictly", async (t) => {
  for (const step of [1, 7, 100_000]) {
    t.same(parse('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  v \r\n\r\nhelloEXTRA', { step }), [
      ['head', 200, 'OK', ['Content-Length', '5', 'X-A', 'v'], false], ['body', 'hello'], ['end'],
    ], `content-length, extra bytes dropped (step ${step})`);
    t.same(parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n4;a=b\r\nwiki\r\n5\r\npedia\r\n0\r\nT: 1\r\n\r\nX', { step }), [
      ['head', 200, 'OK', ['Transfer-Encoding', 'Chunked'], false], ['body', 'wikipedia'], ['end'],
    ], `chunked with an extension and a trailer (step ${step})`);
    t.same(parse('HTTP/1.0 200\r\n\r\nuntil close', { step }), [['head', 200, '', [], false], ['body', 'until close'], ['end']], `no framing: to EOF (step ${step})`);
  }
  t.same(parse('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n', { method: 'HEAD' }), [['head', 200, 'OK', ['Content-Length', '5'], false], ['end']], 'HEAD: no body');
  t.same(parse('HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n'), [['head', 304, 'Not Modified', ['Content-Length', '5'], false], ['end']]);
  t.same(parse('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: <a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n'), [['head', 204, 'No Content', [], false], ['end']], '1xx dropped');
  t.same(parse('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x00', { upgrade: true }), [
    ['head', 101, 'Switching Protocols', ['Upgrade', 'websocket'], true], ['body', '\x81\x00'], ['end'],
  ], 'a 101 to an upgrade: the rest is raw');
  t.same(parse('HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok'), [['head', 200, 'OK', ['Content-Length', '2, 2', 'Content-Length', '2'], false], ['body', 'ok'], ['end']], 'agreeing repeats');

  const refused: Array<[string, string, { method?: string; upgrade?: boolean }?]> = [
    ['HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n', '101 to a plain request'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 'both transfer-encoding and content-length'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 'transfer-encoding'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 'transfer-encoding'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\nbody', 'transfer-encoding'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked,\r\n\r\n', 'transfer-encoding'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok', 'content-length'],
    ['HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', 'content-length'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456\r\n\r\n', 'content-length'],
    ['HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok', 'header name'],
    ['HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n', 'header name'],
    ['HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n', 'header value'],
    ['HTTP/1.1 200 OK\r\nX-A: a\nX-B: b\r\n\r\n', 'header value'],
    ['HTTP/1.1 200 OK\nContent-Length: 0\n\n', 'no answer'],
    ['HTTP/1.1 099 Odd\r\n\r\n', 'status line'],
    ['HTTP/2 200 OK\r\n\r\n', 'status line'],
    ['HTTP/1.1 200 O\rK\r\n\r\n', 'status line'],
    [`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(16 * 1024)}\r\n\r\n`, 'head too large'],
    [`HTTP/1.1 103 Early Hints\r\nX: ${'a'.repeat(10_000)}\r\n\r\nHTTP/1.1 200 OK\r\nY: ${'b'.repeat(7_000)}\r\n\r\n`, 'head too large'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n', 'chunk size'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n', 'chunk size'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n', 'chunk end'],
    [`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${'e'.repeat(5000)}`, 'chunk-size line too long'],
    ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok', 'cut short'],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n', 'cut short'],
    ['', 'no answer'],
    ['HTTP/1.1 200 OK\r\n', 'no answer'],
  ];
  for (const [answer, reason, o] of refused) t.equal(parse(answer, o), reason, JSON.stringify(answer.slice(0, 60)));
});

t.test('preview admission: per machine, then the global byte budget (384 KiB reserved per connection)', async (t) => {
  const adm = new PreviewAdmission({ perMachine: 2, budgetBytes: 3 * 384 * 1024 });
  const a1 = adm.acquire('mch_a');
  const a2 = adm.acquire('mch_a');
  t.same(adm.acquire('mch_a'), { refused: 'machine' });
  const b1 = adm.acquire('mch_b');
  t.same(adm.acquire('mch_b'), { refused: 'budget' }, 'a third machine slot would exceed the budget');
  t.equal(adm.reservedBytes(), 3 * 384 * 1024);
  if (!('release' in a1) || !('release' in a2) || !('release' in b1)) throw new Error('admitted');
  a1.release();
  a1.release();
  t.equal(adm.reservedBytes(), 2 * 384 * 1024, 'a release counts once');
  t.ok('release' in adm.acquire('mch_b'), 'the freed room goes to any machine');
  t.same(DEFAULT_PREVIEW_LIMITS, { perMachine: 128, budgetBytes: 256 * 1024 * 1024 });
});

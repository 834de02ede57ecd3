/** Pure parts of the preview proxy: hostnames and the headers that cross it, pinned literally. */
import t from 'tap';
import { hostOnlyCookie, requestHeadersForGuest, responseHeadersFromGuest, withoutOurCookies } from '../../control-plane/src/previews/headers.js';
import { isPreviewHost, previewDomainOf, previewIdFromHost, previewOrigin } from '../../control-plane/src/previews/hostnames.js';

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

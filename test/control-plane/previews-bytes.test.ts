/**
 * What the app in the machine receives through a preview, byte for byte (issue 22 item 1: Node's
 * http.request over an Http2Stream wrote small requests' heads from freed heap, so the guest got 16 bytes
 * of control-plane memory for a request line), and what the client gets for answers the proxy must refuse
 * (issue 22 item 6: a 101 to a plain request hung the client forever). The real listener, API and agent
 * TCP stream route (fake substrate, in-process agent); the "guest" is a raw TCP listener on this host's
 * loopback that records every byte.
 */
import t from 'tap';
import crypto from 'node:crypto';
import { previewRequest } from '../helpers/preview-client.js';
import { dechunk, publicPreviewOf, rawExchange } from '../helpers/raw-guest.js';

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

t.test('the guest receives exactly the bytes of the request, for every body size and framing', { timeout: 120_000 }, async (t) => {
  const { served, guest, host } = await publicPreviewOf(t, () => OK);
  const forwarded = `Connection: close\r\nX-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: ${host}\r\n\r\n`;

  /** One request through the preview; the bytes the guest got. */
  const through = async (parts: Array<Buffer | string>): Promise<Buffer> => {
    const before = guest.received.length;
    const answer = await rawExchange(served.port, parts);
    t.match(answer.toString('latin1'), /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/, 'the client got the guest answer');
    t.equal(guest.received.length, before + 1, 'one guest connection per request');
    return guest.received[before]!;
  };

  const small = Buffer.from('a=1&b={"x":1}~!@');
  for (let n = 0; n <= 16; n++) {
    const method = ['POST', 'PUT', 'DELETE'][n % 3]!;
    const body = small.subarray(0, n);
    const head = `${method} /form?n=${n} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${n}\r\n`;
    const got = await through([Buffer.concat([Buffer.from(`${head}Connection: close\r\n\r\n`), body])]);
    t.equal(got.toString('latin1'), `${head}${forwarded}${body.toString('latin1')}`, `${method} with a ${n}-byte body arrives byte for byte`);
  }

  const get = `GET /page HTTP/1.1\r\nHost: ${host}\r\nAccept: text/html\r\n`;
  t.equal((await through([`${get}Connection: close\r\n\r\n`])).toString('latin1'), `${get}${forwarded}`, 'a GET without a body');

  // Chunked: sent in three pieces; the guest gets the same payload, chunked, and nothing else.
  const chunkedHead = `POST /upload HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n`;
  const got = await through([`${chunkedHead}Connection: close\r\n\r\n`, '3\r\na=1\r\n', '10\r\n0123456789abcdef\r\n', '0\r\n\r\n']);
  const split = got.indexOf('\r\n\r\n') + 4;
  t.equal(got.subarray(0, split).toString('latin1'), `POST /upload HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n${forwarded}`, 'the chunked head');
  t.equal(dechunk(got.subarray(split)).toString('latin1'), 'a=10123456789abcdef', 'the chunked payload, whole and well framed');

  // Large: 6 MiB of random bytes, compared whole.
  const large = crypto.randomBytes(6 * 1024 * 1024 + 5);
  const largeHead = `PUT /blob HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${large.length}\r\n`;
  const gotLarge = await through([`${largeHead}Connection: close\r\n\r\n`, large]);
  t.equal(gotLarge.subarray(0, gotLarge.length - large.length).toString('latin1'), `${largeHead}${forwarded}`, 'the large head');
  t.ok(gotLarge.subarray(gotLarge.length - large.length).equals(large), 'a 6 MiB body arrives byte for byte');
  t.equal(served.previews!.openConnections(), 0, 'nothing left open');
});

t.test('answers the proxy refuses: a 101 to a plain request, smuggling-shaped framing', { timeout: 120_000 }, async (t) => {
  const answers: Record<string, string> = {
    '/switch': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
    '/both': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n',
    '/two-lengths': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 50\r\n\r\nhello',
    '/gzip-te': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz',
    '/folded': 'HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 2\r\n\r\nok',
    '/space-colon': 'HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok',
    '/bare-lf': 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok',
    '/short': 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok',
    '/hints': 'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal',
    '/extra': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsmuggl',
    '/chunks': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\n',
  };
  const { served, host } = await publicPreviewOf(t, (req) => answers[/^[A-Z]+ (\S+)/.exec(req.toString('latin1'))![1]!] ?? null, {
    early: (head) => (head.startsWith('POST /early ') ? 'HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig' : null),
  });
  const sw = await previewRequest(served.port, host, { path: '/switch' });
  t.equal(sw.status, 503, 'a 101 to a plain request is the unavailable page, not a hang');
  t.match(sw.text, /Nothing is answering yet/);
  const swJson = await previewRequest(served.port, host, { path: '/switch', headers: { accept: 'application/json' } });
  t.equal(swJson.json.error.code, 'compute_unavailable');
  for (const p of ['/both', '/two-lengths', '/gzip-te', '/folded', '/space-colon', '/bare-lf']) {
    t.equal((await previewRequest(served.port, host, { path: p })).status, 503, `${p}: refused`);
  }
  const hints = await previewRequest(served.port, host, { path: '/hints' });
  t.same([hints.status, hints.text], [200, 'final'], 'an informational 103 is dropped, the final answer passes');
  const extra = await rawExchange(served.port, [`GET /extra HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /extra HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`]);
  const answers2 = extra.toString('latin1').split(/(?=HTTP\/1\.1 )/);
  t.equal(answers2.length, 2, 'two pipelined requests, two answers');
  for (const ans of answers2) t.match(ans, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/, 'bytes after the body never reach the client as an answer');
  // An app that answers before reading the upload: the rest of the upload is read and dropped, so the
  // client's connection carries on with its next request.
  const upload = Buffer.alloc(2 * 1024 * 1024, 'u');
  const early = await rawExchange(served.port, [
    `POST /early HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${upload.length}\r\n\r\n`,
    upload,
    `GET /hints HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
  ]);
  t.match(early.toString('latin1'), /^HTTP\/1\.1 413 Too Large\r\n[\s\S]*\r\n\r\nbigHTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nfinal$/, 'the early answer, then the next request on the same connection');
  const chunks = await previewRequest(served.port, host, { path: '/chunks' });
  t.same([chunks.status, chunks.text, chunks.headers['x-trailer']], [200, 'wikipedia', undefined], 'chunk extensions and trailers are read and dropped');
  // A body cut short after the head went out: the client's connection is cut, never left waiting.
  await t.rejects(previewRequest(served.port, host, { path: '/short' }), /aborted|socket hang up|ECONNRESET/, 'a body cut short is a cut connection');
  t.equal(served.previews!.openConnections(), 0, 'nothing left open');
});

/**
 * A small web app for published-port tests and the bench, as one dependency-free Node script (the guest
 * image has node but no npm packages): run it with `node app.cjs PORT`, on this host or inside a machine.
 *   GET  /            "hello from the app"
 *   GET  /headers     the request's headers as JSON (to see what the proxy forwarded)
 *   POST /echo        the request body streamed back
 *   GET  /sse         an event stream: `data: one`, then `data: two` only after GET /sse-next, then the end
 *   GET  /cookie      sets a cookie with a Domain attribute
 *   GET  /big?mb=N    N MiB of bytes
 *   GET  /ws          WebSocket echo (text and binary), written out by hand
 */
import fs from 'node:fs';
import path from 'node:path';

export const PREVIEW_APP_JS = String.raw`
const http = require('http');
const crypto = require('crypto');
const port = Number(process.argv[2]);
let sseWaiters = [];
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/') return res.end('hello from the app');
  if (url.pathname === '/headers') {
    res.setHeader('content-type', 'application/json');
    return res.end(JSON.stringify(req.headers));
  }
  if (url.pathname === '/echo') {
    res.writeHead(200, { 'content-type': req.headers['content-type'] || 'application/octet-stream' });
    return req.pipe(res);
  }
  if (url.pathname === '/sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('data: one\n\n');
    sseWaiters.push(() => res.end('data: two\n\n'));
    return;
  }
  if (url.pathname === '/sse-next') {
    const w = sseWaiters;
    sseWaiters = [];
    w.forEach((f) => f());
    return res.end(String(w.length));
  }
  if (url.pathname === '/cookie') {
    res.setHeader('set-cookie', ['app=1; Domain=localhost; Path=/; HttpOnly', 'computer_preview=evil; Path=/']);
    return res.end('cookie');
  }
  if (url.pathname === '/big') {
    const total = Number(url.searchParams.get('mb') || '1') * 1024 * 1024;
    const chunk = Buffer.alloc(256 * 1024, 120);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
    let left = total;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void res.once('drain', pump);
      }
      res.end();
    };
    return pump();
  }
  res.statusCode = 404;
  res.end('no such page');
});
server.on('upgrade', (req, socket) => {
  if (req.url !== '/ws' || (req.headers.upgrade || '').toLowerCase() !== 'websocket') return socket.destroy();
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  let buf = Buffer.alloc(0);
  const frame = (op, payload) => {
    const n = payload.length;
    const head = n < 126 ? Buffer.from([0x80 | op, n]) : n < 65536 ? Buffer.from([0x80 | op, 126, n >> 8, n & 255]) : Buffer.concat([Buffer.from([0x80 | op, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
    socket.write(Buffer.concat([head, payload]));
  };
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (buf.length < 2) return;
      const op = buf[0] & 15;
      let len = buf[1] & 127;
      let off = 2;
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
      const masked = (buf[1] & 128) !== 0;
      const total = off + (masked ? 4 : 0) + len;
      if (buf.length < total) return;
      const payload = Buffer.from(buf.subarray(off + (masked ? 4 : 0), total));
      if (masked) { const key = buf.subarray(off, off + 4); for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3]; }
      buf = buf.subarray(total);
      if (op === 8) { frame(8, payload.subarray(0, 2)); socket.end(); return; }
      if (op === 9) frame(10, payload);
      else if (op === 1 || op === 2) frame(op, payload);
    }
  });
  socket.on('error', () => {});
});
server.listen(port, '127.0.0.1', () => console.log('listening ' + port));
`;

/** Writes the app to `dir/preview-app.cjs` and returns its path. */
export function writePreviewApp(dir: string): string {
  const p = path.join(dir, 'preview-app.cjs');
  fs.writeFileSync(p, PREVIEW_APP_JS);
  return p;
}

/**
 * The body limit (control-plane/src/api/middleware/body-limit.ts) on the real node server, as main.ts serves the
 * app: a declared length over the limit and a chunked body that runs over it are both the `invalid_request`
 * envelope before the handler reads anything; bodies within it reach the handler whole either way; the limit per
 * route pinned literally.
 */
import http from 'node:http';
import t from 'tap';
import { bodyLimitOf } from '../../control-plane/src/api/middleware/body-limit.js';
import { createHttpServer } from '../../control-plane/src/http-server.js';
import { listen } from '../../control-plane/src/listen.js';
import { makeRig } from '../helpers/control-plane.js';

t.test('the limit of each route', async (t) => {
  t.equal(bodyLimitOf('POST', '/v1/auth/signup'), 262144);
  t.equal(bodyLimitOf('POST', '/v1/machines/mch_x/mouse/move'), 10485760);
  t.equal(bodyLimitOf('POST', '/v1/mcp', ['/v1/mcp']), 10485760);
  t.equal(bodyLimitOf('POST', '/v1/mcp'), 262144, 'a path is machine-sized only when named');
  t.equal(bodyLimitOf('PUT', '/v1/machines/mch_x/files/content'), 45787819);
  t.equal(bodyLimitOf('POST', '/v1/machines/mch_x/files/content'), 10485760);
  t.equal(bodyLimitOf('POST', '/v1/machines'), 262144, 'a create is a small body');
});

t.test('over the node server: declared and chunked, over and within the limit', async (t) => {
  const rig = await makeRig();
  const server = createHttpServer(rig.app.fetch, null);
  const port = await listen(server, 0, '127.0.0.1');
  t.teardown(async () => {
    await new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
    await rig.close();
  });
  const send = (body: string, framing: 'length' | 'chunked') =>
    new Promise<{ status: number; json: any }>((resolve, reject) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (framing === 'length') headers['content-length'] = String(Buffer.byteLength(body));
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/auth/signup', headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString()) }));
      });
      // The server may answer and close before it has read a refused body: the answer is what is checked.
      req.on('error', (e: NodeJS.ErrnoException) => (e.code === 'EPIPE' || e.code === 'ECONNRESET' ? undefined : reject(e)));
      if (framing === 'chunked') for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.slice(i, i + 64 * 1024));
      else req.write(body);
      req.end();
    });
  const signup = (n: number, pad = 0) => JSON.stringify({ email: `limit${n}@example.com`, password: 'a long enough password', ...(pad ? { name: 'x'.repeat(pad) } : {}) });
  const over = { status: 400, json: { error: { code: 'invalid_request', message: 'Request body exceeds 262144 bytes.' } } };

  t.match(await send(signup(1, 300_000), 'length'), over, 'a declared length over the limit');
  t.match(await send(signup(2, 300_000), 'chunked'), over, 'a chunked body that runs over it');
  t.equal(await rig.store.db.q().selectFrom('users').select('id').execute().then((r) => r.length), 0, 'neither reached the handler');
  t.equal((await send(signup(3), 'length')).status, 201, 'a declared length within the limit reaches the handler whole');
  t.equal((await send(signup(4), 'chunked')).status, 201, 'so does a chunked body within it');
});

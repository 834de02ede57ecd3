/**
 * The internal forward between control-plane processes (the `forward` part of `npm run bench`;
 * control-plane/src/cluster/forward/, docs/cluster.md): the same handler served directly on a plain listener and
 * through the forward (a tenant-facing listener whose forwarder signs each request and sends it to the owner's
 * internal listener, which verifies it and serves it), in one run, on loopback, keep-alive on both hops:
 *   - a small GET (2-byte answer), p50/p99 direct and forwarded, and the p50 overhead (target ≤ +2 ms);
 *   - a 100 KB answer, likewise.
 * One process plays both sides (one event loop), so the overhead includes both processes' work.
 * Run alone: `node dist/scripts/bench/forward.js`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import type { ForwardCall } from '../../control-plane/src/cluster/forward/call.js';
import { createForwarder } from '../../control-plane/src/cluster/forward/forwarder.js';
import { DeploymentKey } from '../../control-plane/src/cluster/forward/key.js';
import { createInternalServer } from '../../control-plane/src/cluster/forward/listener.js';
import { fmt, line, measure } from './stats.js';

const N = 2000;
const BODY_100K = Buffer.alloc(100 * 1024, 7);

function app(req: http.IncomingMessage, res: http.ServerResponse): void {
  const body = req.url === '/100k' ? BODY_100K : Buffer.from('ok');
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.length) });
  res.end(body);
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

export async function benchForward(): Promise<void> {
  console.log('\n== internal forward between control-plane processes (loopback, keep-alive) ==');
  const key = DeploymentKey.generate();
  const direct = http.createServer(app);
  const owner = createInternalServer({ key, processId: 'bench-owner', handlers: { request: (req, res) => app(req, res), upgrade: (_q, s) => s.destroy() } });
  const ownerPort = await listen(owner);
  const forwarder = createForwarder({ key, processId: 'bench-edge' });
  const call: ForwardCall = {
    target: { kind: 'remote', processId: 'bench-owner', address: `http://127.0.0.1:${ownerPort}` },
    authorization: 'drop',
    assertion: {
      on_behalf_of: {
        kind: 'tenant', principal_kind: 'api_key', user_id: 'usr_bench', auth_session_id: null, api_key_id: 'key_bench', org_id: 'org_bench',
        role: 'member', scopes: null, permissions: ['machines:control'], via_cookie: false,
      },
      request_id: 'req_bench',
      client: { ip: '127.0.0.1', proto: 'http', host: 'api.bench' },
    },
  };
  const edge = http.createServer((req, res) => forwarder.request(req, res, call));
  const ports = { direct: await listen(direct), forwarded: await listen(edge) };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (port: number, path: string) =>
    new Promise<void>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path, agent, headers: { authorization: 'Bearer sk_bench' } }, (res) => {
        res.resume();
        res.on('end', resolve);
      }).on('error', reject);
    });
  try {
    for (const [label, path] of [['small GET', '/small'], ['100 KB answer', '/100k']] as const) {
      const d = await measure(N, () => get(ports.direct, path), 200);
      const f = await measure(N, () => get(ports.forwarded, path), 200);
      line(`${label}, direct`, fmt(d));
      line(`${label}, through the forward`, fmt(f));
      line(`${label}, forward overhead`, `p50 +${(f.p50 - d.p50).toFixed(2)} ms  p99 +${(f.p99 - d.p99).toFixed(2)} ms  (target p50 ≤ +2 ms)`);
    }
  } finally {
    agent.destroy();
    forwarder.close();
    for (const s of [direct, owner, edge]) {
      s.closeAllConnections();
      s.close();
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchForward();

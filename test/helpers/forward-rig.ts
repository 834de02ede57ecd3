/**
 * The internal forward on loopback (control-plane/src/cluster/forward/): an owner process's internal listener
 * with handlers the test gives, and an "edge" — a plain HTTP server standing in for the tenant-facing port of
 * another process — that forwards every request and upgrade it receives to that owner through a real forwarder.
 * Everything is real node:http on 127.0.0.1 (ports chosen by the kernel); the owner can also run as a child
 * process (forward-owner-child.ts) so a test can kill -9 it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import type { Assertion } from '../../control-plane/src/cluster/forward/assertion.js';
import type { ForwardCall } from '../../control-plane/src/cluster/forward/call.js';
import { createForwarder, type Forwarder } from '../../control-plane/src/cluster/forward/forwarder.js';
import type { AuthorizationRule } from '../../control-plane/src/cluster/forward/headers.js';
import { DeploymentKey } from '../../control-plane/src/cluster/forward/key.js';
import { createInternalServer, type InternalHandlers } from '../../control-plane/src/cluster/forward/listener.js';
import type { LogLine } from '../../control-plane/src/log.js';

export const KEY_HEX = 'a1'.repeat(32);
export const KEY = new DeploymentKey(Buffer.from(KEY_HEX, 'hex'));
export const OWNER_ID = 'cp-owner';
export const EDGE_ID = 'cp-edge';

/** An API key's caller acting in org_acme, as the edge authenticated it. */
export const TENANT: Assertion = {
  on_behalf_of: {
    kind: 'tenant',
    principal_kind: 'api_key',
    user_id: 'usr_alice',
    auth_session_id: null,
    api_key_id: 'key_k1',
    org_id: 'org_acme',
    role: 'member',
    scopes: ['machines:read', 'machines:control'],
    permissions: ['machines:control'],
    via_cookie: false,
  },
  request_id: 'req_r1',
  client: { ip: '203.0.113.7', proto: 'https', host: 'api.example' },
};

export async function listenOn(server: http.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

export interface Owner {
  port: number;
  address: string;
  logs: LogLine[];
  server: http.Server;
}

/** An owner's internal listener in this process. */
export async function startOwner(t: Test, handlers: InternalHandlers, o: { now?: () => number; maxNonces?: number } = {}): Promise<Owner> {
  const logs: LogLine[] = [];
  const server = createInternalServer({ key: KEY, processId: OWNER_ID, handlers, log: (l) => logs.push(l), ...o });
  const port = await listenOn(server);
  t.teardown(() => closeServer(server));
  return { port, address: `http://127.0.0.1:${port}`, logs, server };
}

export interface Edge {
  port: number;
  forwarder: Forwarder;
  logs: LogLine[];
  /** The first log line from index `from` on matching `pred`; waits for it (never on a clock). */
  nextLog(pred: (l: LogLine) => boolean, from?: number): Promise<LogLine>;
}

/** A stand-in for another process's tenant-facing port: everything it receives goes to `address` as `assertion`. */
export async function startEdge(t: Test, address: string, o: { assertion?: Assertion; authorization?: AuthorizationRule } = {}): Promise<Edge> {
  const logs: LogLine[] = [];
  const logged = new EventEmitter();
  const forwarder = createForwarder({ key: KEY, processId: EDGE_ID, log: (l) => logged.emit('line', logs.push(l)) });
  const nextLog = async (pred: (l: LogLine) => boolean, from = 0): Promise<LogLine> => {
    for (;;) {
      const found = logs.slice(from).find(pred);
      if (found) return found;
      await once(logged, 'line');
    }
  };
  const call: ForwardCall = { target: { kind: 'remote', processId: OWNER_ID, address }, assertion: o.assertion ?? TENANT, authorization: o.authorization ?? 'drop' };
  const server = http.createServer((req, res) => forwarder.request(req, res, call));
  server.on('upgrade', (req, socket, head) => forwarder.upgrade(req, socket, head, call));
  const port = await listenOn(server);
  t.teardown(async () => {
    forwarder.close();
    await closeServer(server);
  });
  return { port, forwarder, logs, nextLog };
}

/** A TCP relay in front of `port` that keeps every byte sent towards it: what crossed the wire. */
export async function wiretap(t: Test, port: number): Promise<{ address: string; sent(): string }> {
  const chunks: Buffer[] = [];
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => {});
    }
    client.on('data', (c: Buffer) => chunks.push(c));
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(async () => {
    for (const s of open) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { address: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sent: () => Buffer.concat(chunks).toString('latin1') };
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request on a fresh connection; the whole answer. */
export function call(port: number, o: { method?: string; path?: string; headers?: http.OutgoingHttpHeaders | string[]; body?: Buffer | string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: o.method ?? 'GET', path: o.path ?? '/', headers: o.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'forward-owner-child.ts');

/** An owner in a child process (a WebSocket echo on its internal listener), to be killed for real. */
export async function startOwnerChild(t: Test): Promise<{ proc: ChildProcess; address: string; kill9(): Promise<void> }> {
  const proc = spawn(process.execPath, ['--import=@tapjs/typescript/import', CHILD, KEY_HEX, OWNER_ID], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  t.teardown(async () => {
    proc.kill('SIGKILL');
    await exited;
  });
  const port = await new Promise<number>((resolve, reject) => {
    readline.createInterface({ input: proc.stdout! }).on('line', (l) => {
      if (l.startsWith('{')) resolve((JSON.parse(l) as { port: number }).port);
    });
    proc.once('exit', () => reject(new Error('the owner child exited before listening')));
  });
  return {
    proc,
    address: `http://127.0.0.1:${port}`,
    async kill9() {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * The short way in (docs/cluster.md, "The short way in"): a machine operation whose driver this process remembers
 * (cluster/owner-cache.ts) is forwarded from the listener itself, before the app. The app's way costs the arriving
 * process its router, its middleware and a web Request for every forwarded request, on top of the hop; this one
 * does only what the arriving side must: match the operation, authenticate the caller's API key, and forward.
 *
 * It takes a request only when everything it needs is there, and otherwise leaves it to the app untouched:
 *
 * | the request                                                        | here                                    |
 * |--------------------------------------------------------------------|-----------------------------------------|
 * | not exactly one `machine` operation (method and path), or a `%`   | the app                                 |
 * | no remembered driver for the machine                               | the app (it looks the driver up)        |
 * | no `Authorization: Bearer …` (a cookie, or nothing)                | the app (the cookie's Origin rule there)|
 * | a body that cannot be held (chunked, or over `REPLAY_LIMIT`)       | the app                                 |
 * | a key that is not valid, or acts in no organization, or the store fails | the app (it answers the error) |
 * | all of that holds                                                  | forwarded, as the app would forward it  |
 *
 * What the app checks after the organization (the permission, the handler's input) the driver checks, as it does
 * for every forwarded request. A remembered driver that refuses (it no longer drives the machine) or cannot be reached
 * is forgotten and the request goes to the app with the body already read (`rawBody`, which @hono/node-server reads
 * in place of the socket), which routes it afresh: to the new driver, or served here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { newId } from '../../../shared/ids.js';
import { tenantCall } from '../cluster/forward/tenant-call.js';
import type { Routing } from '../cluster/routing.js';
import { actsInOrg, type Principal } from '../context.js';
import type { LogSink } from '../log.js';
import { clientIpFrom } from './middleware/client-ip.js';
import { REPLAY_LIMIT } from './middleware/owner-route.js';
import { beginRequest, requestLine } from './middleware/request-context.js';
import { opOwner, type Op } from './op.js';

export type FrontOp = Pick<Op, 'name' | 'method' | 'path' | 'owner' | 'auth' | 'org'>;

/** How a request the front took ended: answered (or the caller left), or handed to the app with its read body. */
export type FrontOutcome = { kind: 'answered' } | { kind: 'app'; body: Buffer | null };

/** The front: null when it leaves the request to the app as it came (decided before anything is read). */
export type Front = (req: IncomingMessage, res: ServerResponse) => Promise<FrontOutcome> | null;

export interface FrontRoute {
  method: string;
  pattern: RegExp;
  name: string;
  /** Whether the app forwards this operation to the machine's driver (api/op.ts `mountOp`'s rule). */
  machine: boolean;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Every operation as a request-line pattern: `:machine_id` captured, any other parameter one segment, like hono's. */
export function frontRoutes(ops: readonly FrontOp[]): FrontRoute[] {
  return ops.map((op) => ({
    method: op.method.toUpperCase(),
    name: op.name,
    machine: opOwner(op) === 'machine' && op.auth === 'any' && op.org !== false,
    pattern: new RegExp(`^/v1${op.path.split('/').map((seg) => (seg === ':machine_id' ? '([^/]+)' : seg.startsWith(':') ? '[^/]+' : escape(seg))).join('/')}$`),
  }));
}

/** The operation and machine a request names: exactly one operation matches, and it is a forwarded machine one. */
export function frontMatch(routes: readonly FrontRoute[], method: string, path: string): { name: string; machineId: string } | null {
  if (path.includes('%')) return null;
  let found: { route: FrontRoute; m: RegExpExecArray } | null = null;
  for (const route of routes) {
    if (route.method !== method) continue;
    const m = route.pattern.exec(path);
    if (!m) continue;
    if (found) return null;
    found = { route, m };
  }
  if (!found?.route.machine || !found.m[1]) return null;
  return { name: found.route.name, machineId: found.m[1] };
}

const BEARER = /^Bearer (\S+)$/;

/** X-Forwarded-For as one value (node joins repeated ones; typed as possibly a list all the same). */
const forwardedFor = (req: IncomingMessage): string | undefined => {
  const v = req.headers['x-forwarded-for'];
  return Array.isArray(v) ? v.join(', ') : v;
};

/** Whether the body can be held to send again: none (GET, HEAD), or a stated length up to `REPLAY_LIMIT`. */
function holdable(req: IncomingMessage): boolean {
  if (req.method === 'GET' || req.method === 'HEAD') return true;
  if (req.headers['transfer-encoding'] !== undefined) return false;
  const length = Number(req.headers['content-length'] ?? '0');
  return Number.isSafeInteger(length) && length >= 0 && length <= REPLAY_LIMIT;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  if (req.method === 'GET' || req.method === 'HEAD') return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks);
}

export function forwardFront(d: {
  routing: Routing;
  ops: readonly FrontOp[];
  /** The caller's principal from an API key (services/identity.ts), null when the key is not valid. */
  principalFromApiKey(secret: string): Promise<Principal | null>;
  log: LogSink;
}): Front {
  const routes = frontRoutes(d.ops);
  const { routing } = d;
  return (req, res) => {
    const method = req.method ?? '';
    const url = req.url ?? '';
    const path = url.split('?', 1)[0]!;
    const op = frontMatch(routes, method, path);
    if (!op) return null;
    const target = routing.owners.get(op.machineId);
    const key = BEARER.exec(req.headers.authorization ?? '')?.[1];
    if (!target || key === undefined || !holdable(req)) return null;
    const started = performance.now();
    return (async (): Promise<FrontOutcome> => {
      const principal = await d.principalFromApiKey(key).catch(() => null);
      if (!principal || !actsInOrg(principal)) return { kind: 'app', body: null };
      let body: Buffer;
      try {
        body = await readBody(req);
      } catch {
        // The caller went away while sending: there is no one to answer.
        res.destroy();
        return { kind: 'answered' };
      }
      const requestId = newId('request');
      const call = tenantCall(target, {
        principal, requestId, host: req.headers.host, proto: 'http',
        ip: clientIpFrom(forwardedFor(req), req.socket.remoteAddress, routing.trustProxy),
      }, routing.publicHost);
      const settled = await routing.forwarder.attempt(req, res, call, body.length ? body : undefined);
      if (settled === 'refused') {
        routing.owners.delete(op.machineId);
        beginRequest(req, requestId);
        return { kind: 'app', body };
      }
      d.log(requestLine({
        requestId, operation: op.name, org: principal.org_id, path, method, status: res.statusCode,
        forwardedTo: target.processId, via: 'front', started,
      }));
      return { kind: 'answered' };
    })();
  };
}

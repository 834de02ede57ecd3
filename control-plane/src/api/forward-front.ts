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
 * The body is forwarded as it arrives and held whole beside it (a caller that sends its body after its headers has
 * the forward built and signed meanwhile). What the app checks after the organization (the permission, the handler's
 * input) the driver checks, as it does for every forwarded request. A remembered driver that refuses (it no longer
 * drives the machine) or cannot be reached is forgotten and the request goes to the app with the body held
 * (`rawBody`, which @hono/node-server reads in place of the socket), which routes it afresh: to the new driver, or
 * served here.
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

/** How a request the front took ended: answered (or the caller left), or handed to the app with its held body. */
export type FrontOutcome = { kind: 'answered' } | { kind: 'app'; body: Buffer | null };

/** The front: null when it leaves the request to the app as it came (decided before anything is read). */
export type Front = (req: IncomingMessage, res: ServerResponse) => Promise<FrontOutcome> | null;

export interface FrontRoute {
  pattern: RegExp;
  name: string;
  /** Whether the app forwards this operation to the machine's driver (api/op.ts `mountOp`'s rule). */
  machine: boolean;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Every path the short way takes starts so (a machine operation names its machine first). */
const MACHINE_PREFIX = '/v1/machines/';

/**
 * The operations a path under `MACHINE_PREFIX` can match, by method, each as a request-line pattern: `:machine_id`
 * captured, any other parameter one segment, like hono's. An operation whose first segment is another word cannot
 * match such a path, so it is left out; one whose first segment is a parameter could, so it stays (a match must be
 * the only one).
 */
export type FrontTable = ReadonlyMap<string, readonly FrontRoute[]>;

export function frontRoutes(ops: readonly FrontOp[]): FrontTable {
  const table = new Map<string, FrontRoute[]>();
  for (const op of ops) {
    const segments = op.path.split('/');
    const first = segments[1] ?? '';
    if (first !== 'machines' && !first.startsWith(':')) continue;
    const method = op.method.toUpperCase();
    const routes = table.get(method) ?? [];
    routes.push({
      name: op.name,
      machine: opOwner(op) === 'machine' && op.auth === 'any' && op.org !== false,
      pattern: new RegExp(`^/v1${segments.map((seg) => (seg === ':machine_id' ? '([^/]+)' : seg.startsWith(':') ? '[^/]+' : escape(seg))).join('/')}$`),
    });
    table.set(method, routes);
  }
  return table;
}

/** The operation and machine a request names: exactly one operation matches, and it is a forwarded machine one. */
export function frontMatch(table: FrontTable, method: string, path: string): { name: string; machineId: string } | null {
  if (!path.startsWith(MACHINE_PREFIX) || path.includes('%')) return null;
  let found: { route: FrontRoute; m: RegExpExecArray } | null = null;
  for (const route of table.get(method) ?? []) {
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

/** GET and HEAD carry no body (one sent with them is not read). */
const bodiless = (req: IncomingMessage): boolean => req.method === 'GET' || req.method === 'HEAD';

/** Whether the body can be held to send again: none (GET, HEAD), or a stated length up to `REPLAY_LIMIT`. */
function holdable(req: IncomingMessage): boolean {
  if (bodiless(req)) return true;
  if (req.headers['transfer-encoding'] !== undefined) return false;
  const length = Number(req.headers['content-length'] ?? '0');
  return Number.isSafeInteger(length) && length >= 0 && length <= REPLAY_LIMIT;
}

/**
 * The body held whole while it is forwarded as it arrives (the forwarder pipes `req`; both take the same chunks), so
 * that a driver's refusal can hand it to the app: the body once it all came, null when the caller went away first.
 * Forwarding as it arrives lets the forward be built and signed while a body sent after its headers is on its way.
 */
function heldWhileForwarded(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  return new Promise((resolve) => {
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', () => resolve(null));
    req.once('close', () => resolve(null));
  });
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
      const requestId = newId('request');
      const call = tenantCall(target, {
        principal, requestId, host: req.headers.host, proto: 'http',
        ip: clientIpFrom(forwardedFor(req), req.socket.remoteAddress, routing.trustProxy),
      }, routing.publicHost);
      const held = bodiless(req) ? null : heldWhileForwarded(req);
      const settled = await routing.forwarder.attempt(req, res, call, held ? req : undefined);
      if (settled === 'refused') {
        routing.owners.delete(op.machineId);
        const body = held ? await held : Buffer.alloc(0);
        if (!body) {
          // The caller went away while sending: there is no one to answer.
          res.destroy();
          return { kind: 'answered' };
        }
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

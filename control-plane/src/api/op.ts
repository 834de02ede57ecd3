/**
 * One route operation. Its name (`api_keys.create`) is the RBAC key, the log field and the file name.
 * `mountOp` wires the gates in a fixed order: operation name → credential → organization → permission.
 *
 * Every operation declares its contract here — query and body schemas, and a schema (or a non-JSON
 * kind) per success status — because the OpenAPI document (api/openapi.ts) is built from the mounted
 * operations and nothing else. The handler reads its input through `io`, which parses with exactly the
 * declared schemas, so the document cannot drift from what the handler accepts.
 */
import type { Context, Hono } from 'hono';
import { every } from 'hono/combine';
import type { z } from 'zod';
import type { Permission } from '../../../shared/schemas/org.js';
import type { CpEnv } from '../context.js';
import type { Services } from '../services/index.js';
import { jsonBody, queryOf } from './body.js';
import { authenticate, refuseForeignOrigin, requireOrg, requirePermission, type AuthMode } from './middleware/auth.js';
import { markRefusals, routeToHost, routeToOwner, type OpOwner, type Routing } from './middleware/owner-route.js';
import type { HostChoice } from '../services/placement.js';
import { ERRORS } from '../errors.js';

/** A success answer: a JSON schema, no body (204), an HTML page, or a redirect (303). */
export type OpResponse = z.ZodType | 'empty' | 'html' | 'redirect';
export type SuccessStatus = 200 | 201 | 202 | 204 | 303;

type Parsed<S> = S extends z.ZodType ? z.output<S> : never;

/** The handler's typed view of its declared input. Parsing happens when called, so handlers keep their check order. */
export interface OpIo<Q, B> {
  query(): Parsed<Q>;
  body(): Promise<Parsed<B>>;
}

export interface Op<P extends string = string, Q extends z.ZodType | undefined = z.ZodType | undefined, B extends z.ZodType | undefined = z.ZodType | undefined> {
  name: string;
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Path under /v1; `:name` segments are the path parameters (typed in the handler's context). */
  path: P;
  /** One line for the API reference. */
  summary?: string;
  /** 'none': no credential (signup, login, provider links). */
  auth: AuthMode | 'none';
  /** Needs an active organization (default: true when authenticated). */
  org?: boolean;
  permission?: Permission;
  /**
   * What the operation acts on, for the internal channel (api/middleware/owner-route.ts): `machine` — the machine
   * its `:machine_id` names, served by the process driving that machine's host; `host` — the substrate without
   * naming a machine (a create), served by the driver of the host its `hostChoice` names; `any` — the store only, served
   * wherever it arrives. Default (`opOwner`): `machine` under `/machines/:machine_id`, else `any`.
   */
  owner?: OpOwner;
  /**
   * A `machine` operation served wherever it arrives when the machine's host is down (no driver to forward to):
   * delete, which then forgets the machine and leaves its disk to the host's return, and start, which answers that
   * the machine's disk is on a lost host (409) instead of a retryable 503 (docs/operations.md, "Losing a host").
   */
  onLostHost?: 'serve_here';
  /**
   * For a `host` operation: which host, from its parsed body and its path's parameters (services/placement.ts
   * `HostChoice`). Omitted: this process's host (`here`).
   */
  hostChoice?(body: Parsed<B>, params: Record<string, string>): HostChoice;
  /** Query parameters (a strict object of strings); omitted: the operation takes none. */
  query?: Q;
  /** JSON request body; omitted: no body. */
  body?: B;
  /** Every success status the operation answers, with its body. Errors are the common envelope. */
  responses: Partial<Record<SuccessStatus, OpResponse>>;
  // Method syntax on purpose: an Op<'/machines/:machine_id'> is an Op (parameters are compared bivariantly).
  handler(c: Context<CpEnv, P>, s: Services, io: OpIo<Q, B>): Response | Promise<Response>;
}

export function defineOp<P extends string, Q extends z.ZodType | undefined = undefined, B extends z.ZodType | undefined = undefined>(
  op: Op<P, Q, B>,
): Op<P, Q, B> {
  return op;
}

/** Names of the path parameters, in order (`/machines/:machine_id/ports/:preview_id` → machine_id, preview_id). */
export function pathParams(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
}

/** An operation's owner: declared, or `machine` for every route under `/machines/:machine_id`, else `any`. */
export function opOwner(op: Pick<Op, 'owner' | 'path'>): OpOwner {
  return op.owner ?? (/^\/machines\/:machine_id(?:\/|$)/.test(op.path) ? 'machine' : 'any');
}

export interface MountOptions {
  /**
   * Parse every JSON success answer against the operation's declared schema and fail loudly on a
   * mismatch. Tests turn it on, so the whole suite checks the published response schemas.
   */
  checkResponses?: boolean;
  /** Several processes (PostgreSQL): machine and host operations go to their owner. Absent: everything is served here. */
  routing?: Routing;
}

export function mountOp(app: Hono<CpEnv>, s: Services, op: Op, opts: MountOptions = {}): void {
  const gates = every(
    async (c: Context<CpEnv>, next: () => Promise<void>) => {
      c.set('operation', op.name);
      await next();
    },
    ...(op.auth === 'none' ? [refuseForeignOrigin(s)] : [authenticate(s, op.auth)]),
    ...(op.auth !== 'none' && op.org !== false ? [requireOrg()] : []),
  );
  const permitted = op.permission ? [requirePermission(op.permission)] : [];
  const owner = opOwner(op);
  // After the credential and the organization (the arriving process checks both). A machine operation is forwarded
  // before the permission and the handler (the owner applies them, exactly as here); a host operation after the
  // permission, since choosing its host reads its body (a malformed one is the handler's 400, answered here).
  const routing = opts.routing && owner !== 'any' && op.auth !== 'none' && op.org !== false ? opts.routing : null;
  const chooseHost = async (c: Context<CpEnv>): Promise<HostChoice> =>
    op.hostChoice && op.body ? op.hostChoice(await jsonBody(c, op.body), c.req.param()) : { kind: 'here' };
  const chain = !routing
    ? permitted
    : owner === 'machine'
      ? [routeToOwner(routing, { onLostHost: op.onLostHost }), ...permitted]
      : [markRefusals, ...permitted, routeToHost(routing, chooseHost)];
  const undeclared = (what: 'query' | 'body'): never => {
    throw new Error(`${op.name} declares no ${what}`);
  };
  app.on(op.method.toUpperCase(), op.path, gates, ...chain, async (c) => {
    const io: OpIo<z.ZodType | undefined, z.ZodType | undefined> = {
      query: () => (op.query ? queryOf(c, op.query) : undeclared('query')),
      body: async () => (op.body ? jsonBody(c, op.body) : undeclared('body')),
    };
    const res = await op.handler(c, s, io);
    if (opts.checkResponses) await checkResponse(op, res);
    return res;
  });
}

async function checkResponse(op: Op, res: Response): Promise<void> {
  if (res.status >= 400) return;
  const declared = op.responses[res.status as SuccessStatus];
  if (declared === undefined) throw ERRORS.undeclaredStatus(op.name, res.status);
  if (typeof declared === 'string') return;
  const r = declared.safeParse(await res.clone().json());
  if (!r.success) throw ERRORS.responseSchemaMismatch(op.name, res.status, JSON.stringify(r.error.issues).slice(0, 400));
}

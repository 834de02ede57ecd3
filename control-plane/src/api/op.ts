/**
 * One route operation. Its name (`api_keys.create`) is the RBAC key, the log field and the file name.
 * `mountOp` wires the gates in a fixed order: operation name → credential → organization → permission.
 */
import type { Context, Hono } from 'hono';
import type { Permission } from '../../../shared/schemas/org.js';
import type { CpEnv } from '../context.js';
import type { Services } from '../services/index.js';
import { authenticate, refuseForeignOrigin, requireOrg, requirePermission, type AuthMode } from './middleware/auth.js';

export interface Op {
  name: string;
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Path under /v1. */
  path: string;
  /** 'none': no credential (signup, login, provider links). */
  auth: AuthMode | 'none';
  /** Needs an active organization (default: true when authenticated). */
  org?: boolean;
  permission?: Permission;
  handler: (c: Context<CpEnv>, s: Services) => Response | Promise<Response>;
}

export function defineOp(op: Op): Op {
  return op;
}

export function mountOp(app: Hono<CpEnv>, s: Services, op: Op): void {
  const chain = [
    async (c: Context<CpEnv>, next: () => Promise<void>) => {
      c.set('operation', op.name);
      await next();
    },
    ...(op.auth === 'none' ? [refuseForeignOrigin(s)] : [authenticate(s, op.auth)]),
    ...(op.auth !== 'none' && op.org !== false ? [requireOrg()] : []),
    ...(op.permission ? [requirePermission(op.permission)] : []),
  ];
  const on = app.on.bind(app) as unknown as (method: string, path: string, ...handlers: unknown[]) => void;
  on(op.method.toUpperCase(), op.path, ...chain, (c: Context<CpEnv>) => op.handler(c, s));
}

import { z } from 'zod';
import { EnvMap, GuestPath, GuestUser } from './common.js';

export const MAX_PTY_COLS = 1000;
export const MAX_PTY_ROWS = 500;

export const PtyOpen = z.strictObject({
  /** argv; the user's login shell when omitted. */
  command: z.array(z.string().max(131072)).min(1).max(4096).optional(),
  cwd: GuestPath.optional(),
  user: GuestUser.default('agent'),
  cols: z.number().int().min(1).max(MAX_PTY_COLS).default(80),
  rows: z.number().int().min(1).max(MAX_PTY_ROWS).default(24),
  env: EnvMap.optional(),
});
export type PtyOpen = z.infer<typeof PtyOpen>;

export const PtyResize = z.strictObject({
  cols: z.number().int().min(1).max(MAX_PTY_COLS),
  rows: z.number().int().min(1).max(MAX_PTY_ROWS),
});
export type PtyResize = z.infer<typeof PtyResize>;

export const Terminal = z.object({
  id: z.string(),
  command: z.array(z.string()),
  user: GuestUser,
  cols: z.number().int(),
  rows: z.number().int(),
  created_at: z.string(),
  /** Whether a client is attached to the byte stream right now. */
  attached: z.boolean(),
});
export type Terminal = z.infer<typeof Terminal>;

export const TerminalList = z.object({ terminals: z.array(Terminal) });

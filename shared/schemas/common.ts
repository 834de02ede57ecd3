import { z } from 'zod';

/** Query strings arrive as text; these coerce and still refuse garbage like `quality=abc`. */
export const queryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^-?\d+$/, 'must be an integer')
    .transform((s) => Number(s))
    .pipe(z.number().int().min(min).max(max));

export const queryBool = z
  .enum(['true', 'false', '1', '0'])
  .transform((s) => s === 'true' || s === '1');

/** Guest-side user a piece of work runs as. */
export const GuestUser = z.enum(['agent', 'root']);
export type GuestUser = z.infer<typeof GuestUser>;

/** An absolute guest path. NUL can never be part of a path. */
export const GuestPath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => p.startsWith('/'), 'must be an absolute path')
  .refine((p) => !p.includes('\0'), 'must not contain NUL');

export const EnvMap = z
  .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are [A-Za-z_][A-Za-z0-9_]*'), z.string().max(65536))
  .refine((m) => Object.keys(m).length <= 256, 'at most 256 variables')
  .refine((m) => Object.values(m).every((v) => !v.includes('\0')), 'values must not contain NUL');

import { z } from 'zod';
import { EnvMap, GuestPath, GuestUser } from './common.js';

export const DEFAULT_EXEC_TIMEOUT_MS = 60_000;
export const MAX_EXEC_TIMEOUT_MS = 3_600_000;
/** Each of stdout and stderr keeps at most this many bytes; the rest is cut and flagged. */
export const MAX_EXEC_OUTPUT = 1024 * 1024;
export const MAX_EXEC_STDIN = 8 * 1024 * 1024;

/** One-shot command. argv only: no shell, no tokenizing. */
export const ExecRequest = z.strictObject({
  command: z
    .array(z.string().max(131072).refine((a) => !a.includes('\0'), 'must not contain NUL'))
    .min(1)
    .max(4096)
    .refine((c) => c.length === 0 || c[0]!.length > 0, 'command[0] must name a program'),
  user: GuestUser.default('agent'),
  cwd: GuestPath.optional(),
  env: EnvMap.optional(),
  stdin: z.string().max(MAX_EXEC_STDIN).optional(),
  timeout_ms: z.number().int().min(1).max(MAX_EXEC_TIMEOUT_MS).default(DEFAULT_EXEC_TIMEOUT_MS),
});
export type ExecRequest = z.infer<typeof ExecRequest>;

export const ExecResult = z.object({
  stdout: z.string(),
  stderr: z.string(),
  /** The process's exit status; 128 + signal number when a signal ended it (as a shell reports). */
  exit_code: z.number().int(),
  /** Name of the signal that ended the process, or null. */
  signal: z.string().nullable(),
  timed_out: z.boolean(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  duration_ms: z.number(),
});
export type ExecResult = z.infer<typeof ExecResult>;

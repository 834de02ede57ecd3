import { z } from 'zod';

export const MachineSize = z.enum(['small', 'standard', 'large']);
export type MachineSize = z.infer<typeof MachineSize>;

export const MachineState = z.enum(['creating', 'running', 'stopping', 'stopped', 'starting', 'error', 'deleting']);
export type MachineState = z.infer<typeof MachineState>;

/** DNS-label shaped so a name can appear in hostnames: lowercase letters, digits, dashes. */
export const MachineName = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/, 'names are lowercase letters, digits and dashes, not starting or ending with a dash');

export const MAX_METADATA_ENTRIES = 64;
export const Metadata = z
  .record(z.string().min(1).max(64), z.string().max(1024))
  .refine((m) => Object.keys(m).length <= MAX_METADATA_ENTRIES, `at most ${MAX_METADATA_ENTRIES} metadata entries`);
export type Metadata = z.infer<typeof Metadata>;

export const LeaseRequest = z.strictObject({
  session_id: z.string().min(1).max(64),
  ttl_seconds: z.number().int().min(5).max(3600).default(60),
  force: z.boolean().default(false),
});
export type LeaseRequest = z.infer<typeof LeaseRequest>;

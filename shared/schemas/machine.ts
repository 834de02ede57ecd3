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

/** A placement hint; stored and echoed. */
export const Region = z.string().min(1).max(64).regex(/^[a-z0-9][a-z0-9-]*$/, 'regions are lowercase letters, digits and dashes');

export const CreateMachineRequest = z.strictObject({
  name: MachineName.optional(),
  /** Default: the template's size, else small. */
  size: MachineSize.optional(),
  template: z.string().min(1).max(64).optional(),
  region: Region.optional(),
  metadata: Metadata.default({}),
  start: z.boolean().default(true),
});
export type CreateMachineRequest = z.infer<typeof CreateMachineRequest>;

/** PATCH: only what is given changes; `metadata` replaces the whole map. */
export const UpdateMachineRequest = z
  .strictObject({ name: MachineName.optional(), metadata: Metadata.optional() })
  .refine((b) => b.name !== undefined || b.metadata !== undefined, 'give name or metadata');
export type UpdateMachineRequest = z.infer<typeof UpdateMachineRequest>;

export const MachineListQuery = z.strictObject({
  limit: z.string().regex(/^\d+$/, 'must be an integer').transform(Number).pipe(z.number().int().min(1).max(200)).optional(),
  cursor: z.string().min(1).max(512).optional(),
  state: MachineState.optional(),
});
export type MachineListQuery = z.infer<typeof MachineListQuery>;

export const Machine = z.object({
  id: z.string(),
  name: z.string(),
  size: MachineSize,
  template: z.string().nullable(),
  region: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
  state: MachineState,
  created_at: z.string(),
  updated_at: z.string(),
  state_changed_at: z.string(),
});
export type Machine = z.infer<typeof Machine>;

/** The closed set of event types (spec, Events §2). */
export const EVENT_TYPES = [
  'machine.created', 'machine.started', 'machine.ready', 'machine.stopped', 'machine.failed', 'machine.updated',
  'machine.deleted', 'session.connected', 'session.control_acquired', 'session.control_released',
  'session.disconnected', 'snapshot.started', 'snapshot.completed', 'snapshot.failed', 'snapshot.deleted',
  'machine.restore_started', 'machine.restore_completed', 'machine.restore_failed', 'host.unhealthy',
] as const;
export const EventType = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventType>;

export const EventListQuery = z.strictObject({
  limit: z.string().regex(/^\d+$/, 'must be an integer').transform(Number).pipe(z.number().int().min(1).max(200)).optional(),
  cursor: z.string().min(1).max(512).optional(),
});
export type EventListQuery = z.infer<typeof EventListQuery>;

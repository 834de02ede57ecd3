/**
 * Snapshots (captured disks) and the routes that use them: capture, list, fork, restore.
 * The spec names the failure state `error` (its event is `snapshot.failed`).
 */
import { z } from 'zod';
import { MACHINE_ID_RE } from '../ids.js';
import { queryBool } from './common.js';
import { MachineName, Region } from './machine.js';
import { PageQuery } from './pagination.js';

export const SnapshotState = z.enum(['pending', 'ready', 'error', 'deleting']);
export type SnapshotState = z.infer<typeof SnapshotState>;

/**
 * The spec's three: manual: requested (POST /v1/snapshots); stop: taken automatically when the machine stopped
 * (the billing stop, "Stopped by billing", and the restore's capture of the stopped disk, "Before restore");
 * template: the capture behind a template made from a machine.
 */
export const SnapshotOrigin = z.enum(['manual', 'stop', 'template']);
export type SnapshotOrigin = z.infer<typeof SnapshotOrigin>;

/** A caller label: printable text, no control characters. */
export const ResourceLabel = z
  .string()
  .min(1)
  .max(128)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), 'must not contain control characters');

export const MachineIdField = z.string().regex(MACHINE_ID_RE, 'must be a machine id (mch_…)');
const OpaqueId = z.string().min(1).max(64);

export const CreateSnapshotRequest = z.strictObject({
  machine_id: MachineIdField,
  name: ResourceLabel.optional(),
});
export type CreateSnapshotRequest = z.infer<typeof CreateSnapshotRequest>;

/** `?wait=true` holds the answer until the capture has settled (ready or error). */
export const WaitQuery = z.strictObject({ wait: queryBool.optional() });
export type WaitQuery = z.infer<typeof WaitQuery>;

export const SnapshotListQuery = PageQuery.extend({
  machine_id: OpaqueId.optional(),
  origin: SnapshotOrigin.optional(),
});
export type SnapshotListQuery = z.infer<typeof SnapshotListQuery>;

export const Snapshot = z.strictObject({
  id: z.string(),
  name: z.string(),
  machine_id: z.string(),
  state: SnapshotState,
  origin: SnapshotOrigin,
  includes_memory: z.literal(false),
  /** Bytes the capture holds (its own layer); null until ready. */
  size_bytes: z.number().int().min(0).nullable(),
  created_at: z.string(),
  /** When it settled (ready or error); null while pending. */
  completed_at: z.string().nullable(),
});
export type Snapshot = z.infer<typeof Snapshot>;

/** POST /v1/machines/{id}/fork: a new machine from one of its snapshots, or from its disk as it is now. */
export const ForkMachineRequest = z.strictObject({
  snapshot_id: OpaqueId.optional(),
  name: MachineName.optional(),
  /**
   * A placement hint, as create's (default: the parent's). A fork of a snapshot may be placed on any host of the
   * region (its disk's layers are copied there first); a fork of the machine's disk as it is now is taken where the
   * machine runs, so a region other than that host's is refused (409).
   */
  region: Region.optional(),
});
export type ForkMachineRequest = z.infer<typeof ForkMachineRequest>;

export const RestoreMachineRequest = z.strictObject({ snapshot_id: OpaqueId });
export type RestoreMachineRequest = z.infer<typeof RestoreMachineRequest>;

/**
 * Snapshot and template states, as data. Pure: imports only shared/.
 *
 * A snapshot is born `pending` (the capture is under way), settles `ready` (a layer holds the disk) or
 * `error` (nothing is held), and is deleted through `deleting` (its layer pin is being released; a release
 * that did not finish is retried by a second delete or by the reconciler). A template is born `building`
 * and settles `ready` or `error`; it is deleted directly.
 */
import type { SnapshotState } from '../../../shared/schemas/snapshot.js';
import type { TemplateState } from '../../../shared/schemas/template.js';

export type SnapshotTrigger = 'capture' | 'captured' | 'capture_failed' | 'delete';

export const SNAPSHOT_TRANSITIONS: ReadonlyArray<{ from: SnapshotState | null; trigger: SnapshotTrigger; to: SnapshotState }> = [
  { from: null, trigger: 'capture', to: 'pending' },
  { from: 'pending', trigger: 'captured', to: 'ready' },
  { from: 'pending', trigger: 'capture_failed', to: 'error' },
  { from: 'ready', trigger: 'delete', to: 'deleting' },
  { from: 'error', trigger: 'delete', to: 'deleting' },
  // A delete whose release did not finish can be asked again.
  { from: 'deleting', trigger: 'delete', to: 'deleting' },
];

export function decideSnapshot(from: SnapshotState | null, trigger: SnapshotTrigger): SnapshotState | null {
  return SNAPSHOT_TRANSITIONS.find((t) => t.from === from && t.trigger === trigger)?.to ?? null;
}

/** States in which a snapshot counts against `snapshots_per_machine`: it holds, or will hold, a disk. */
export const COUNTED_SNAPSHOT_STATES: readonly SnapshotState[] = ['pending', 'ready'];

export type TemplateTrigger = 'create' | 'built' | 'build_failed';

export const TEMPLATE_TRANSITIONS: ReadonlyArray<{ from: TemplateState | null; trigger: TemplateTrigger; to: TemplateState }> = [
  { from: null, trigger: 'create', to: 'building' },
  { from: 'building', trigger: 'built', to: 'ready' },
  { from: 'building', trigger: 'build_failed', to: 'error' },
];

export function decideTemplate(from: TemplateState | null, trigger: TemplateTrigger): TemplateState | null {
  return TEMPLATE_TRANSITIONS.find((t) => t.from === from && t.trigger === trigger)?.to ?? null;
}

/** States in which a template counts against `templates`. */
export const COUNTED_TEMPLATE_STATES: readonly TemplateState[] = ['building', 'ready'];

/**
 * Newest-only deletion (spec: "only the newest snapshot of a machine's chain may be deleted"). `chain` is the
 * machine's snapshots newest first. Returns the snapshot in the way, or null when `id` may be deleted.
 */
export function snapshotInTheWay<T extends { id: string }>(chain: readonly T[], id: string): T | null {
  const newest = chain[0];
  return newest && newest.id !== id ? newest : null;
}

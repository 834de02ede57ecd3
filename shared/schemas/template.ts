/**
 * Templates: a named starting point for new machines. Made from a snapshot, from a machine (captured now,
 * origin `template`), or from neither (the base image at a size, with no captured disk).
 */
import { z } from 'zod';
import { MachineSize } from './machine.js';
import { PageQuery } from './pagination.js';
import { MachineIdField, ResourceLabel } from './snapshot.js';

export const TemplateState = z.enum(['building', 'ready', 'error']);
export type TemplateState = z.infer<typeof TemplateState>;

/** Where the template's disk came from; `image` has none (the base image). */
export const TemplateSource = z.enum(['snapshot', 'machine', 'image']);
export type TemplateSource = z.infer<typeof TemplateSource>;

/** Exactly one source: `snapshot_id`, `machine_id`, or `size` alone (an image and size with no disk). */
export const CreateTemplateRequest = z
  .strictObject({
    name: ResourceLabel,
    snapshot_id: z.string().min(1).max(64).optional(),
    machine_id: MachineIdField.optional(),
    size: MachineSize.optional(),
  })
  .superRefine((b, ctx) => {
    const given = (['snapshot_id', 'machine_id', 'size'] as const).filter((k) => b[k] !== undefined);
    if (given.length === 1) return;
    const message = given.length === 0 ? 'give one of snapshot_id, machine_id or size' : `give only one of ${given.join(', ')}`;
    for (const k of given.length ? given.slice(1) : (['snapshot_id'] as const)) ctx.addIssue({ code: 'custom', path: [k], message });
  });
export type CreateTemplateRequest = z.infer<typeof CreateTemplateRequest>;

export const TemplateListQuery = PageQuery;
export type TemplateListQuery = z.infer<typeof TemplateListQuery>;

export const Template = z.strictObject({
  id: z.string(),
  name: z.string(),
  state: TemplateState,
  source: TemplateSource,
  /** Machines created from the template get this size unless they ask for a larger one. */
  size: MachineSize,
  /** The snapshot it was made from (also for `machine`: the capture behind it), else null. */
  snapshot_id: z.string().nullable(),
  /** The machine it was captured from, else null. */
  machine_id: z.string().nullable(),
  size_bytes: z.number().int().min(0).nullable(),
  created_at: z.string(),
  completed_at: z.string().nullable(),
});
export type Template = z.infer<typeof Template>;

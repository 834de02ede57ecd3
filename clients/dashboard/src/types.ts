/** Answer types of the routes the dashboard calls, inferred from the shared zod schemas (types only). */
import type { z } from 'zod';
import type { Machine as MachineSchema } from '../../../shared/schemas/machine.js';
import type {
  ApiKey as ApiKeySchema,
  BillingAccount as BillingSchema,
  CreatedApiKey as CreatedApiKeySchema,
  Invitation as InvitationSchema,
  LeaseGrant as LeaseGrantSchema,
  LeaseState as LeaseStateSchema,
  Me as MeSchema,
  Member as MemberSchema,
  MachineEvent as MachineEventSchema,
  Plan as PlanSchema,
  Preview as PreviewSchema,
  PlanList as PlanListSchema,
  Session as SessionSchema,
} from '../../../shared/schemas/responses.js';
import type { Secret } from '../../../shared/schemas/secrets.js';
import type { Snapshot as SnapshotSchema } from '../../../shared/schemas/snapshot.js';
import type { Template as TemplateSchema } from '../../../shared/schemas/template.js';

export type Page<T> = { data: T[]; next_cursor: string | null };
export type Machine = z.infer<typeof MachineSchema>;
export type Me = z.infer<typeof MeSchema>;
export type Billing = z.infer<typeof BillingSchema>;
export type Plan = z.infer<typeof PlanSchema>;
export type PlanList = z.infer<typeof PlanListSchema>;
export type Member = z.infer<typeof MemberSchema>;
export type Invitation = z.infer<typeof InvitationSchema>;
export type ApiKey = z.infer<typeof ApiKeySchema>;
export type CreatedApiKey = z.infer<typeof CreatedApiKeySchema>;
export type Session = z.infer<typeof SessionSchema>;
export type LeaseGrant = z.infer<typeof LeaseGrantSchema>;
export type LeaseState = z.infer<typeof LeaseStateSchema>;
export type MachineEvent = z.infer<typeof MachineEventSchema>;
export type Snapshot = z.infer<typeof SnapshotSchema>;
export type Template = z.infer<typeof TemplateSchema>;
export type Preview = z.infer<typeof PreviewSchema>;
export type { Secret };

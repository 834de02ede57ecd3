/**
 * Response schemas of the control plane's own routes (identity, tenancy, billing, sessions, leases,
 * events, previews). Machine-agent answers reuse the agent protocol's schemas (display, files, exec…),
 * snapshots and templates theirs. Published in the OpenAPI document; tests parse every answer with them.
 */
import { z } from 'zod';
import { ERROR_CODES, QUOTA_LIMIT_KEYS } from '../errors.js';
import { BillingState } from './billing.js';
import { EventType, Machine } from './machine.js';
import { InvitationState, Role, Scope } from './org.js';
import { PreviewAccess } from './ports.js';
import { OrgSecret } from './secrets.js';
import { SessionState, SessionType } from './session.js';
import { Snapshot } from './snapshot.js';
import { Template } from './template.js';

/** Every list answer: `{ data, next_cursor }` (null on the last page). */
export const pageOf = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), next_cursor: z.string().nullable() });

export const AuthResult = z.object({
  user_id: z.string(),
  organization_id: z.string().nullable(),
  auth_session_id: z.string(),
  expires_at: z.string(),
});

export const Me = z.object({
  user: z.object({ id: z.string(), email: z.string(), name: z.string().nullable(), created_at: z.string() }),
  principal: z.union([
    z.object({ type: z.literal('user'), id: z.string(), auth_session_id: z.string().nullable() }),
    z.object({ type: z.literal('api_key'), id: z.string().nullable(), scopes: z.array(Scope).nullable() }),
  ]),
  organization: z.object({ id: z.string(), name: z.string(), personal: z.boolean(), role: Role.nullable() }).nullable(),
  organizations: z.array(z.object({ id: z.string(), name: z.string(), role: Role })),
  permissions: z.array(z.string()),
});

export const AuthSession = z.object({
  id: z.string(),
  created_at: z.string(),
  last_used_at: z.string(),
  expires_at: z.string(),
  current: z.boolean(),
});
export const AuthSessionPage = pageOf(AuthSession);

export const Member = z.object({
  id: z.string(),
  user_id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  role: Role,
  created_at: z.string(),
});
export const MemberPage = pageOf(Member);

export const Invitation = z.object({
  id: z.string(),
  email: z.string(),
  role: Role,
  state: InvitationState,
  created_at: z.string(),
  expires_at: z.string(),
  accepted_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
});
export const InvitationPage = pageOf(Invitation);
/** The creating answer alone carries the token. */
export const CreatedInvitation = Invitation.extend({ token: z.string() });
export const AcceptedInvitation = z.object({ membership: Member, organization: z.object({ id: z.string(), name: z.string() }) });

export const ApiKey = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  scopes: z.array(Scope),
  created_by: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
});
export const ApiKeyPage = pageOf(ApiKey);
/** The creating answer alone carries the secret. */
export const CreatedApiKey = ApiKey.extend({ secret: z.string() });

export const ProviderLink = z.object({ url: z.string() });

const Trial = z.looseObject({ days: z.number().int() });
export const Plan = z.object({
  id: z.string(),
  name: z.string(),
  catalog_version: z.string(),
  effective_from: z.string(),
  /** Decimal string in `currency`; null = negotiated. */
  price: z.object({ amount: z.string(), currency: z.string(), interval: z.literal('month') }).nullable(),
  self_serve: z.boolean(),
  entitlements: z.record(z.string(), z.unknown()),
  trial: Trial.nullable(),
});
const Size = z.object({ id: z.string(), vcpu: z.number(), memory_mb: z.number(), disk_gb: z.number(), weight_milli: z.number() });
/** Prices are decimal strings in `currency`. */
const CatalogExtras = { sizes: z.array(Size), prices: z.record(z.string(), z.string()), currency: z.string() };
export const PlanDetail = Plan.extend(CatalogExtras);
export const PlanList = pageOf(Plan).extend({ catalog_version: z.string(), effective_from: z.string(), ...CatalogExtras });

export const QuotaLimit = z.object({ key: z.string(), current: z.number(), limit: z.number().nullable() });
export const BillingAccount = z.object({
  organization_id: z.string(),
  state: BillingState,
  provider: z.string(),
  plan: z.object({ id: z.string(), name: z.string() }).nullable(),
  catalog_version: z.string().nullable(),
  period: z.object({ start: z.string(), end: z.string().nullable() }).nullable(),
  trial_ends_at: z.string().nullable().optional(),
  trial: Trial.nullable().optional(),
  limits: z.array(QuotaLimit),
});

export const MachinePage = pageOf(Machine);
export const SnapshotPage = pageOf(Snapshot);
export const TemplatePage = pageOf(Template);
export const OrgSecretPage = pageOf(OrgSecret);

export const Session = z.object({
  id: z.string(),
  machine_id: z.string(),
  type: SessionType,
  state: SessionState,
  opener: z.object({ type: z.enum(['user', 'api_key']), id: z.string() }),
  created_at: z.string(),
  closed_at: z.string().nullable(),
});
export const SessionPage = pageOf(Session);

export const LeaseGrant = z.object({
  machine_id: z.string(),
  session_id: z.string(),
  fence: z.number().int(),
  expires_at: z.string(),
  renewed: z.boolean(),
});
export const LeaseState = z.object({
  machine_id: z.string(),
  held: z.boolean(),
  session_id: z.string().nullable(),
  fence: z.number().int(),
  expires_at: z.string().nullable(),
  holder: z.object({ session_id: z.string(), type: z.string(), opener: z.object({ type: z.string(), id: z.string() }) }).nullable(),
});

export const MachineEvent = z.object({
  id: z.string(),
  type: EventType,
  machine_id: z.string(),
  created_at: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export const MachineEventPage = pageOf(MachineEvent);

export const Preview = z.object({
  id: z.string(),
  machine_id: z.string(),
  port: z.number().int(),
  name: z.string().nullable(),
  access: PreviewAccess,
  url: z.string(),
  secret: z.string().nullable().optional(),
  access_url: z.string().nullable(),
  last_request_at: z.string().nullable(),
  created_at: z.string(),
});
export const PreviewPage = pageOf(Preview);

/** The one error envelope of every route (shared/errors.ts renders it). */
export const ErrorEnvelope = z.object({
  error: z.object({
    code: z.enum(ERROR_CODES as [string, ...string[]]),
    message: z.string(),
    request_id: z.string(),
    details: z.array(z.object({ field: z.string(), message: z.string() })),
    quota: z
      .object({
        limit: z.enum(QUOTA_LIMIT_KEYS),
        current: z.number(),
        maximum: z.number().nullable(),
        plan_id: z.string(),
        upgrade_url: z.string().nullable(),
      })
      .nullable(),
  }),
});
export type ErrorEnvelopeBody = z.infer<typeof ErrorEnvelope>;

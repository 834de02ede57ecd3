/**
 * The tables as Kysely sees them (typed rows for queries on either engine), and the value sets their CHECK
 * constraints allow (engine/migrations.ts builds the CHECKs from the same lists). Timestamps are ISO-8601 UTC
 * text, JSON columns are text, 64-bit integers come back as JS numbers on both engines (engine/postgres.ts).
 */
import type { ColumnType, Generated } from 'kysely';
import type { Meter } from '../../../../shared/schemas/usage.js';
import { HOST_STATES } from '../../domain/host-states.js';

export { HOST_STATES };

export const ROLES = ['owner', 'admin', 'member'] as const;
export const INVITATION_STATES = ['pending', 'accepted', 'revoked', 'expired'] as const;
export const BILLING_STATES = ['unsubscribed', 'trialing', 'active', 'past_due', 'canceled'] as const;
export const BILLING_LINK_KINDS = ['checkout', 'portal'] as const;
export const MACHINE_SIZES = ['small', 'standard', 'large'] as const;
export const MACHINE_STATES = ['creating', 'running', 'stopping', 'stopped', 'starting', 'error', 'deleting'] as const;
export const CREATOR_KINDS = ['user', 'api_key'] as const;
export const SESSION_TYPES = ['agent', 'human', 'view'] as const;
export const SESSION_STATES = ['active', 'idle', 'closed'] as const;
export const SNAPSHOT_STATES = ['pending', 'ready', 'error', 'deleting'] as const;
/** Snapshot origins up to version 9 (`restore` became `stop` in version 10). */
export const SNAPSHOT_ORIGINS_V3 = ['manual', 'stop', 'restore', 'template'] as const;
export const SNAPSHOT_ORIGINS = ['manual', 'stop', 'template'] as const;
export const TEMPLATE_STATES = ['building', 'ready', 'error'] as const;
export const TEMPLATE_SOURCES = ['snapshot', 'machine', 'image'] as const;
export const PREVIEW_ACCESS = ['private', 'public'] as const;
export const METER_CURSOR_KINDS = ['machine', 'snapshot', 'template'] as const;

type Of<T extends readonly string[]> = T[number];
type Ts = string;

export interface UsersTable { id: string; email: string; name: string | null; password_hash: string; personal_org_id: string | null; created_at: Ts }
export interface OrganizationsTable { id: string; name: string; personal: number; created_at: Ts }
export interface MembershipsTable { id: string; org_id: string; user_id: string; role: Of<typeof ROLES>; created_at: Ts }
export interface InvitationsTable {
  id: string; org_id: string; email: string; role: Of<typeof ROLES>; state: Of<typeof INVITATION_STATES>; token_hash: string;
  invited_by: string; created_at: Ts; expires_at: Ts; accepted_at: Ts | null; accepted_by: string | null; revoked_at: Ts | null;
}
export interface ApiKeysTable {
  id: string; org_id: string; created_by: string; name: string; prefix: string; secret_hash: string;
  /** JSON array of scopes. */
  scopes: string; created_at: Ts; last_used_at: Ts | null; revoked_at: Ts | null;
}
export interface AuthSessionsTable {
  id: string; user_id: string; token_hash: string; active_org_id: string | null; created_at: Ts; last_used_at: Ts; expires_at: Ts; revoked_at: Ts | null;
}
export interface RateLimitsTable { bucket: string; window_start_ms: number; count: number }
export interface BillingAccountsTable {
  org_id: string; state: Of<typeof BILLING_STATES>; plan_id: string | null; catalog_version: string | null; provider: string;
  trial_ends_at: Ts | null; period_start: Ts | null; period_end: Ts | null; updated_at: Ts;
}
/** `seq`: the order events were recorded in (migration 12). */
export interface BillingEventsTable { id: string; org_id: string; type: string; from_state: string; to_state: string; created_at: Ts; seq: Generated<number> }
export interface BillingLinksTable {
  token_hash: string; kind: Of<typeof BILLING_LINK_KINDS>; org_id: string; plan_id: string | null; return_url: string | null;
  created_at: Ts; expires_at: Ts; used_at: Ts | null;
}
export interface EntitlementOverridesTable { id: string; org_id: string; entitlements: string; effective_from: Ts; effective_until: Ts | null; created_at: Ts }
export interface MachinesTable {
  id: string; org_id: string; name: string; size: Of<typeof MACHINE_SIZES>; template: string | null; region: string | null;
  /** JSON object of strings. */
  metadata: string; state: Of<typeof MACHINE_STATES>;
  /** The guest agent's bearer token. Never leaves the control plane except towards the agent. */
  agent_token: string; created_by_kind: Of<typeof CREATOR_KINDS>; created_by_id: string;
  created_at: Ts; updated_at: Ts; state_changed_at: Ts; deleted_at: Ts | null;
  /**
   * The host holding the machine's disk (version 11). NULL: recorded before hosts existed, so on the deployment's
   * only host until its driver adopts it (docs/operations.md, "Hosts"). Optional on insert (NULL by default).
   */
  host_id: ColumnType<string | null, string | null | undefined, string | null>;
}
export interface SessionsTable {
  id: string; org_id: string; machine_id: string; type: Of<typeof SESSION_TYPES>; state: Of<typeof SESSION_STATES>;
  opener_kind: Of<typeof CREATOR_KINDS>; opener_id: string; created_at: Ts; closed_at: Ts | null; last_active_at: Ts | null;
}
export interface InputLeasesTable { machine_id: string; session_id: string | null; fence: number; expires_at: number; updated_at: Ts }
export interface MachineEventsTable { seq: Generated<number>; id: string; org_id: string; machine_id: string; type: string; data: string; created_at: Ts }
export interface SnapshotsTable {
  id: string; org_id: string; machine_id: string; name: string; state: Of<typeof SNAPSHOT_STATES>; origin: Of<typeof SNAPSHOT_ORIGINS>;
  layer_id: string | null; size_bytes: number | null; created_at: Ts; completed_at: Ts | null; host_id: string | null;
}
export interface TemplatesTable {
  id: string; org_id: string; name: string; state: Of<typeof TEMPLATE_STATES>; source: Of<typeof TEMPLATE_SOURCES>; size: Of<typeof MACHINE_SIZES>;
  snapshot_id: string | null; machine_id: string | null; layer_id: string | null; size_bytes: number | null; created_at: Ts; completed_at: Ts | null;
  host_id: string | null;
}
export interface MachineSecretsTable {
  id: string; org_id: string; machine_id: string; name: string; version: number; key_id: string; sealed: Buffer; value_bytes: number;
  created_at: Ts; updated_at: Ts; delivered_at: Ts | null; delivered_version: number | null; delivered_boot: string | null;
}
export interface PreviewsTable {
  id: string; org_id: string; machine_id: string; port: number; name: string | null; access: Of<typeof PREVIEW_ACCESS>;
  secret_hash: string | null; access_token_hash: string | null; cookie_hash: string | null; last_request_at: Ts | null; created_at: Ts; deleted_at: Ts | null;
}
export interface UsageRecordsTable {
  id: string; org_id: string; source_id: string; machine_id: string | null; template_id: string | null; meter: Meter;
  /** '' when the meter has no size. */
  size: Generated<Of<typeof MACHINE_SIZES> | ''>; hour: Ts;
  /** Written as a bigint (byte-seconds outgrow a double), read back as decimal text by the repository. */
  quantity: ColumnType<number, number | bigint, number | bigint>; updated_at: Ts;
}
export interface MeterCursorsTable { source_id: string; kind: Of<typeof METER_CURSOR_KINDS>; metered_until: Ts }
export interface UsageSummariesTable { org_id: string; period_start: Ts; body: string; created_at: Ts }
export interface StripeCustomersTable { org_id: string; customer_id: string; subscription_id: string | null; last_event_created: number | null; created_at: Ts }
export interface StripeWebhookEventsTable { id: string; type: string; org_id: string | null; outcome: string; received_at: Ts }
export interface StripeMeterReportsTable {
  org_id: string; period_start: Ts; period_end: Ts; meter: string; reported: Generated<number>; pending: number | null; closed: Generated<number>;
}
export interface VolumeRestartsTable { machine_id: string; stopped_at: Ts | null }
/** One host of the deployment: a DATA_DIR with its substrate (version 11; store/repos/hosts.ts). */
export interface HostsTable {
  id: string; region: Generated<string>; state: Of<typeof HOST_STATES>;
  /** Bumped by each driver's takeover and by being declared down: a driver's fence. */
  epoch: Generated<number>;
  /** Where the host's driver takes forwarded requests (other processes only); NULL until a driver registers one. */
  internal_url: string | null;
  /** JSON: domain/host-capacity.ts's HostCapacity. */
  capacity: string; heartbeat_at: Ts | null; created_at: Ts; updated_at: Ts;
}
/** Deployment-wide secrets created once and shared by every process (version 11; store/repos/cluster-keys.ts). */
export interface ClusterKeysTable { name: string; key: Buffer; created_at: Ts }

/** Every table, for `Kysely<Database>`. */
export interface Database {
  users: UsersTable;
  organizations: OrganizationsTable;
  memberships: MembershipsTable;
  invitations: InvitationsTable;
  api_keys: ApiKeysTable;
  auth_sessions: AuthSessionsTable;
  rate_limits: RateLimitsTable;
  billing_accounts: BillingAccountsTable;
  billing_events: BillingEventsTable;
  billing_links: BillingLinksTable;
  entitlement_overrides: EntitlementOverridesTable;
  machines: MachinesTable;
  sessions: SessionsTable;
  input_leases: InputLeasesTable;
  machine_events: MachineEventsTable;
  snapshots: SnapshotsTable;
  templates: TemplatesTable;
  machine_secrets: MachineSecretsTable;
  previews: PreviewsTable;
  usage_records: UsageRecordsTable;
  meter_cursors: MeterCursorsTable;
  usage_summaries: UsageSummariesTable;
  stripe_customers: StripeCustomersTable;
  stripe_webhook_events: StripeWebhookEventsTable;
  stripe_meter_reports: StripeMeterReportsTable;
  volume_restarts: VolumeRestartsTable;
  hosts: HostsTable;
  cluster_keys: ClusterKeysTable;
}

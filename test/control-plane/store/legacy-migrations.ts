/**
 * The SQLite migrations 1..10 exactly as they shipped before the store had two engines (issue 24): frozen here
 * as the reference that control-plane/src/store/engine/migrations.ts must reproduce (engine-schema.test.ts), and
 * to build databases as earlier releases left them. New migrations go in engine/migrations.ts, never here.
 * Timestamps are ISO-8601 UTC strings (sortable); secrets are stored only as SHA-256 hashes.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const LEGACY_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'identity and tenancy',
    sql: `
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  name TEXT,
  password_hash TEXT NOT NULL,
  personal_org_id TEXT,
  created_at TEXT NOT NULL
);
CREATE TABLE organizations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  personal INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
);
CREATE TABLE memberships (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  user_id TEXT NOT NULL REFERENCES users(id),
  role TEXT NOT NULL CHECK (role IN ('owner','admin','member')),
  created_at TEXT NOT NULL,
  UNIQUE (org_id, user_id)
);
CREATE INDEX memberships_user ON memberships(user_id);
CREATE TABLE invitations (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  email TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('owner','admin','member')),
  state TEXT NOT NULL CHECK (state IN ('pending','accepted','revoked','expired')),
  token_hash TEXT NOT NULL UNIQUE,
  invited_by TEXT NOT NULL REFERENCES users(id),
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  accepted_at TEXT,
  accepted_by TEXT REFERENCES users(id),
  revoked_at TEXT
);
CREATE INDEX invitations_org ON invitations(org_id, created_at, id);
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  created_by TEXT NOT NULL REFERENCES users(id),
  name TEXT NOT NULL,
  prefix TEXT NOT NULL,
  secret_hash TEXT NOT NULL UNIQUE,
  scopes TEXT NOT NULL,
  created_at TEXT NOT NULL,
  last_used_at TEXT,
  revoked_at TEXT
);
CREATE INDEX api_keys_org ON api_keys(org_id, created_at, id);
CREATE TABLE auth_sessions (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id),
  token_hash TEXT NOT NULL UNIQUE,
  active_org_id TEXT REFERENCES organizations(id),
  created_at TEXT NOT NULL,
  last_used_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX auth_sessions_user ON auth_sessions(user_id, created_at, id);
CREATE TABLE rate_limits (
  bucket TEXT PRIMARY KEY,
  window_start_ms INTEGER NOT NULL,
  count INTEGER NOT NULL
);
CREATE TABLE billing_accounts (
  org_id TEXT PRIMARY KEY REFERENCES organizations(id),
  state TEXT NOT NULL CHECK (state IN ('unsubscribed','trialing','active','past_due','canceled')),
  plan_id TEXT,
  catalog_version TEXT,
  provider TEXT NOT NULL,
  trial_ends_at TEXT,
  period_start TEXT,
  period_end TEXT,
  updated_at TEXT NOT NULL
);
CREATE TABLE billing_events (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  type TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE billing_links (
  token_hash TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('checkout','portal')),
  org_id TEXT NOT NULL REFERENCES organizations(id),
  plan_id TEXT,
  return_url TEXT,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  used_at TEXT
);
CREATE TABLE entitlement_overrides (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  entitlements TEXT NOT NULL,
  effective_from TEXT NOT NULL,
  effective_until TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX entitlement_overrides_org ON entitlement_overrides(org_id, effective_from);
`,
  },
  {
    version: 2,
    name: 'machines, sessions, input leases, machine events',
    sql: `
CREATE TABLE machines (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  name TEXT NOT NULL,
  size TEXT NOT NULL CHECK (size IN ('small','standard','large')),
  template TEXT,
  region TEXT,
  metadata TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('creating','running','stopping','stopped','starting','error','deleting')),
  agent_token TEXT NOT NULL,
  created_by_kind TEXT NOT NULL CHECK (created_by_kind IN ('user','api_key')),
  created_by_id TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  state_changed_at TEXT NOT NULL,
  deleted_at TEXT
);
CREATE INDEX machines_org ON machines(org_id, created_at, id);
CREATE UNIQUE INDEX machines_org_name ON machines(org_id, name) WHERE deleted_at IS NULL;
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  machine_id TEXT NOT NULL REFERENCES machines(id),
  type TEXT NOT NULL CHECK (type IN ('agent','human','view')),
  state TEXT NOT NULL CHECK (state IN ('active','idle','closed')),
  opener_kind TEXT NOT NULL CHECK (opener_kind IN ('user','api_key')),
  opener_id TEXT NOT NULL,
  created_at TEXT NOT NULL,
  closed_at TEXT
);
CREATE INDEX sessions_org ON sessions(org_id, created_at, id);
CREATE INDEX sessions_machine ON sessions(machine_id, state);
CREATE TABLE input_leases (
  machine_id TEXT PRIMARY KEY REFERENCES machines(id),
  session_id TEXT REFERENCES sessions(id),
  fence INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE machine_events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  machine_id TEXT NOT NULL REFERENCES machines(id),
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX machine_events_machine ON machine_events(machine_id, seq);
`,
  },
  {
    version: 3,
    name: 'snapshots and templates',
    // No foreign key to machines with a cascade: snapshots outlive their machine (machine rows are only
    // soft-deleted anyway). layer_id names the substrate's layer and never leaves the control plane.
    sql: `
CREATE TABLE snapshots (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  machine_id TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending','ready','error','deleting')),
  origin TEXT NOT NULL CHECK (origin IN ('manual','stop','restore','template')),
  layer_id TEXT,
  size_bytes INTEGER,
  created_at TEXT NOT NULL,
  completed_at TEXT
);
CREATE INDEX snapshots_org ON snapshots(org_id, created_at, id);
CREATE INDEX snapshots_machine ON snapshots(machine_id, created_at, id);
CREATE TABLE templates (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('building','ready','error')),
  source TEXT NOT NULL CHECK (source IN ('snapshot','machine','image')),
  size TEXT NOT NULL CHECK (size IN ('small','standard','large')),
  snapshot_id TEXT,
  machine_id TEXT,
  layer_id TEXT,
  size_bytes INTEGER,
  created_at TEXT NOT NULL,
  completed_at TEXT
);
CREATE INDEX templates_org ON templates(org_id, created_at, id);
`,
  },
  {
    version: 4,
    name: 'machine secrets (sealed values)',
    sql: `
CREATE TABLE machine_secrets (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  machine_id TEXT NOT NULL REFERENCES machines(id),
  name TEXT NOT NULL,
  version INTEGER NOT NULL CHECK (version >= 1),
  key_id TEXT NOT NULL,
  sealed BLOB NOT NULL,
  value_bytes INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  delivered_at TEXT,
  delivered_version INTEGER,
  delivered_boot TEXT,
  UNIQUE (machine_id, name)
);
CREATE INDEX machine_secrets_org ON machine_secrets(org_id, created_at, id);
CREATE INDEX machine_secrets_key ON machine_secrets(key_id);
`,
  },
  {
    version: 5,
    name: 'published ports (previews)',
    // Unpublished rows stay as tombstones (deleted_at): a preview id, and so its hostname, is never
    // issued twice. Credentials are SHA-256 digests only; access_token_hash is cleared when the one-shot
    // access link is used.
    sql: `
CREATE TABLE previews (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  machine_id TEXT NOT NULL REFERENCES machines(id),
  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
  name TEXT,
  access TEXT NOT NULL CHECK (access IN ('private','public')),
  secret_hash TEXT,
  access_token_hash TEXT,
  cookie_hash TEXT,
  last_request_at TEXT,
  created_at TEXT NOT NULL,
  deleted_at TEXT
);
CREATE UNIQUE INDEX previews_machine_port ON previews(machine_id, port) WHERE deleted_at IS NULL;
CREATE INDEX previews_org ON previews(org_id, created_at, id);
CREATE INDEX previews_machine ON previews(machine_id, created_at, id);
`,
  },
  {
    version: 6,
    name: 'usage records and meter cursors',
    // One row per (subject, meter, size, UTC hour), grown in place by each flush: a record never straddles
    // an hour. meter_cursors holds, per metered subject, the instant its usage is recorded up to; a flush
    // adds the interval since and moves the cursor in one transaction, so a crash can lose at most the
    // interval in flight and never counts one twice. Quantities are exact integers (byte-seconds too).
    sql: `
CREATE TABLE usage_records (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  source_id TEXT NOT NULL,
  machine_id TEXT,
  template_id TEXT,
  meter TEXT NOT NULL,
  size TEXT NOT NULL DEFAULT '',
  hour TEXT NOT NULL,
  quantity INTEGER NOT NULL CHECK (quantity >= 0),
  updated_at TEXT NOT NULL,
  UNIQUE (org_id, source_id, meter, size, hour)
);
CREATE INDEX usage_records_org_hour ON usage_records(org_id, hour, id);
CREATE TABLE meter_cursors (
  source_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('machine','snapshot','template')),
  metered_until TEXT NOT NULL
);
CREATE TABLE usage_summaries (
  org_id TEXT NOT NULL,
  period_start TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (org_id, period_start)
);
`,
  },
  {
    version: 7,
    name: 'stripe customers, processed webhook events and reported meter quantities',
    // stripe_customers links an organization to its Stripe customer and current subscription, and keeps
    // the `created` second of the last subscription event applied (older ones arriving late are stale).
    // stripe_webhook_events makes delivery idempotent on the event id (Stripe retries and replays).
    // stripe_meter_reports remembers, per period and meter, the cumulative quantity Stripe has
    // acknowledged and the one in flight (`pending`): a crash between the call and the record resends
    // the same identifier, which Stripe deduplicates, so nothing is reported twice.
    sql: `
CREATE TABLE stripe_customers (
  org_id TEXT PRIMARY KEY,
  customer_id TEXT NOT NULL UNIQUE,
  subscription_id TEXT,
  last_event_created INTEGER,
  created_at TEXT NOT NULL
);
CREATE TABLE stripe_webhook_events (
  id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  org_id TEXT,
  outcome TEXT NOT NULL,
  received_at TEXT NOT NULL
);
CREATE TABLE stripe_meter_reports (
  org_id TEXT NOT NULL,
  period_start TEXT NOT NULL,
  period_end TEXT NOT NULL,
  meter TEXT NOT NULL,
  reported INTEGER NOT NULL DEFAULT 0,
  pending INTEGER,
  closed INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, period_start, meter)
);
`,
  },
  {
    version: 8,
    name: 'session activity',
    // When a session was last in use (a gateway channel attached or detached, or its input lease seen
    // live): the idle and expiry sweep counts from here (services/sessions.ts). NULL: its created_at.
    sql: `
ALTER TABLE sessions ADD COLUMN last_active_at TEXT;
`,
  },
  {
    version: 9,
    name: 'volume restarts',
    // Machines a disk-volume recovery stopped and owes a start (services/machines/disk-volume.ts): recorded with the
    // decision to stop them, so a control plane killed before the volume is back still starts them.
    // `stopped_at`: the machine's state_changed_at once the recovery stopped it (NULL until then); a machine
    // that moved since (a user's start or stop) is left as its user left it.
    sql: `
CREATE TABLE volume_restarts (
  machine_id TEXT PRIMARY KEY,
  stopped_at TEXT
);
`,
  },
  {
    version: 10,
    name: 'snapshot origins are the spec\'s three',
    // The spec's origins are manual, stop and template; "Before restore" captures were recorded as `restore`.
    // They become `stop` (the restore stops the machine and captures the stopped disk), and the CHECK allows
    // only the three. SQLite cannot change a CHECK in place: the table is rebuilt (nothing references it).
    sql: `
CREATE TABLE snapshots_v10 (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  machine_id TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending','ready','error','deleting')),
  origin TEXT NOT NULL CHECK (origin IN ('manual','stop','template')),
  layer_id TEXT,
  size_bytes INTEGER,
  created_at TEXT NOT NULL,
  completed_at TEXT
);
INSERT INTO snapshots_v10 (id, org_id, machine_id, name, state, origin, layer_id, size_bytes, created_at, completed_at)
  SELECT id, org_id, machine_id, name, state, CASE origin WHEN 'restore' THEN 'stop' ELSE origin END, layer_id, size_bytes,
    created_at, completed_at FROM snapshots;
DROP TABLE snapshots;
ALTER TABLE snapshots_v10 RENAME TO snapshots;
CREATE INDEX snapshots_org ON snapshots(org_id, created_at, id);
CREATE INDEX snapshots_machine ON snapshots(machine_id, created_at, id);
`,
  },
];

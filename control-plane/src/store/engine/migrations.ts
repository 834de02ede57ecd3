/**
 * The one set of schema migrations, run by both engines (SQLite: store/db.ts; PostgreSQL: engine/postgres.ts).
 * Append only: a shipped migration is never edited, because databases in the field record its version (SQLite in
 * `PRAGMA user_version`, PostgreSQL in `schema_migrations`). Versions 1..10 are, column for column, the SQL that
 * shipped before the engines (test/control-plane/store/engine-schema.test.ts proves the two build the same schema),
 * so an existing data dir migrates forward in place.
 *
 * Written with Kysely's schema builder; the differences between the engines are data in `EngineTypes` (64-bit
 * integers, byte strings, the event sequence) plus the one rebuild SQLite needs to change a CHECK (version 10).
 * Timestamps are ISO-8601 UTC text on both engines (sortable, as the repos compare them); JSON is text.
 */
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type ColumnDefinitionBuilder,
  type CompiledQuery,
  type SchemaModule,
} from 'kysely';
import {
  BILLING_LINK_KINDS,
  BILLING_STATES,
  CREATOR_KINDS,
  HOST_STATES,
  INVITATION_STATES,
  MACHINE_SIZES,
  MACHINE_STATES,
  METER_CURSOR_KINDS,
  PREVIEW_ACCESS,
  ROLES,
  SESSION_STATES,
  SESSION_TYPES,
  SNAPSHOT_ORIGINS,
  SNAPSHOT_ORIGINS_V3,
  SNAPSHOT_STATES,
  TEMPLATE_SOURCES,
  TEMPLATE_STATES,
} from './schema.js';

export type Engine = 'sqlite' | 'postgres';

/** What differs between the engines, as data. */
interface EngineTypes {
  /** SQLite's INTEGER is 64-bit; PostgreSQL's integer is not (epoch milliseconds, byte-seconds). */
  int: 'integer' | 'bigint';
  blob: 'blob' | 'bytea';
  /** An insertion sequence (machine_events, billing_events): strictly increasing, never reused. */
  serial: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;
}

const ENGINE_TYPES: Record<Engine, EngineTypes> = {
  sqlite: { int: 'integer', blob: 'blob', serial: (c) => c.primaryKey().autoIncrement() },
  // BY DEFAULT, not ALWAYS: copying a SQLite deployment into PostgreSQL keeps each event's seq.
  postgres: { int: 'bigint', blob: 'bytea', serial: (c) => c.generatedByDefaultAsIdentity().primaryKey() },
};

/** One statement a migration runs: a schema builder, or `raw` SQL both engines accept. */
export interface Step {
  compile(): CompiledQuery;
}

export interface SchemaKit extends EngineTypes {
  engine: Engine;
  schema: SchemaModule;
  raw(text: string): Step;
}

export interface Migration {
  version: number;
  name: string;
  up(k: SchemaKit): Step[];
}

/** `column IN ('a','b')` for a CHECK. */
function oneOf(column: string, values: readonly string[]) {
  return sql.raw(`${column} IN (${values.map((v) => `'${v}'`).join(',')})`);
}

const textId = (c: ColumnDefinitionBuilder) => c.primaryKey();
const required = (c: ColumnDefinitionBuilder) => c.notNull();
const org = (c: ColumnDefinitionBuilder) => c.notNull().references('organizations.id');

/** The snapshots table: created by version 3, rebuilt with the spec's origins by version 10. */
function snapshotsTable(k: SchemaKit, name: string, origins: readonly string[]) {
  return k.schema
    .createTable(name)
    .addColumn('id', 'text', textId)
    .addColumn('org_id', 'text', org)
    .addColumn('machine_id', 'text', required)
    .addColumn('name', 'text', required)
    .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', SNAPSHOT_STATES)))
    .addColumn('origin', 'text', (c) => c.notNull().check(oneOf('origin', origins)))
    .addColumn('layer_id', 'text')
    .addColumn('size_bytes', k.int)
    .addColumn('created_at', 'text', required)
    .addColumn('completed_at', 'text');
}

function snapshotsIndexes(k: SchemaKit): Step[] {
  return [
    k.schema.createIndex('snapshots_org').on('snapshots').columns(['org_id', 'created_at', 'id']),
    k.schema.createIndex('snapshots_machine').on('snapshots').columns(['machine_id', 'created_at', 'id']),
  ];
}

/**
 * The billing_events table's columns as version 1 made them: `id` its key then; version 12 rebuilds it (SQLite) with
 * `id` unique and the `seq` it adds as the key.
 */
function billingEventsTable(k: SchemaKit, name: string, id: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder = (c) => c.notNull().unique()) {
  return k.schema
    .createTable(name)
    .addColumn('id', 'text', id)
    .addColumn('org_id', 'text', org)
    .addColumn('type', 'text', required)
    .addColumn('from_state', 'text', required)
    .addColumn('to_state', 'text', required)
    .addColumn('created_at', 'text', required);
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'identity and tenancy',
    up: (k) => [
      k.schema
        .createTable('users')
        .addColumn('id', 'text', textId)
        .addColumn('email', 'text', (c) => c.notNull().unique())
        .addColumn('name', 'text')
        .addColumn('password_hash', 'text', required)
        .addColumn('personal_org_id', 'text')
        .addColumn('created_at', 'text', required),
      k.schema
        .createTable('organizations')
        .addColumn('id', 'text', textId)
        .addColumn('name', 'text', required)
        .addColumn('personal', k.int, (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'text', required),
      k.schema
        .createTable('memberships')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
        .addColumn('role', 'text', (c) => c.notNull().check(oneOf('role', ROLES)))
        .addColumn('created_at', 'text', required)
        .addUniqueConstraint('memberships_org_id_user_id_key', ['org_id', 'user_id']),
      k.schema.createIndex('memberships_user').on('memberships').column('user_id'),
      k.schema
        .createTable('invitations')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('email', 'text', required)
        .addColumn('role', 'text', (c) => c.notNull().check(oneOf('role', ROLES)))
        .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', INVITATION_STATES)))
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('invited_by', 'text', (c) => c.notNull().references('users.id'))
        .addColumn('created_at', 'text', required)
        .addColumn('expires_at', 'text', required)
        .addColumn('accepted_at', 'text')
        .addColumn('accepted_by', 'text', (c) => c.references('users.id'))
        .addColumn('revoked_at', 'text'),
      k.schema.createIndex('invitations_org').on('invitations').columns(['org_id', 'created_at', 'id']),
      k.schema
        .createTable('api_keys')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('created_by', 'text', (c) => c.notNull().references('users.id'))
        .addColumn('name', 'text', required)
        .addColumn('prefix', 'text', required)
        .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
        .addColumn('scopes', 'text', required)
        .addColumn('created_at', 'text', required)
        .addColumn('last_used_at', 'text')
        .addColumn('revoked_at', 'text'),
      k.schema.createIndex('api_keys_org').on('api_keys').columns(['org_id', 'created_at', 'id']),
      k.schema
        .createTable('auth_sessions')
        .addColumn('id', 'text', textId)
        .addColumn('user_id', 'text', (c) => c.notNull().references('users.id'))
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('active_org_id', 'text', (c) => c.references('organizations.id'))
        .addColumn('created_at', 'text', required)
        .addColumn('last_used_at', 'text', required)
        .addColumn('expires_at', 'text', required)
        .addColumn('revoked_at', 'text'),
      k.schema.createIndex('auth_sessions_user').on('auth_sessions').columns(['user_id', 'created_at', 'id']),
      k.schema
        .createTable('rate_limits')
        .addColumn('bucket', 'text', textId)
        .addColumn('window_start_ms', k.int, required)
        .addColumn('count', k.int, required),
      k.schema
        .createTable('billing_accounts')
        .addColumn('org_id', 'text', (c) => c.primaryKey().references('organizations.id'))
        .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', BILLING_STATES)))
        .addColumn('plan_id', 'text')
        .addColumn('catalog_version', 'text')
        .addColumn('provider', 'text', required)
        .addColumn('trial_ends_at', 'text')
        .addColumn('period_start', 'text')
        .addColumn('period_end', 'text')
        .addColumn('updated_at', 'text', required),
      billingEventsTable(k, 'billing_events', textId),
      k.schema
        .createTable('billing_links')
        .addColumn('token_hash', 'text', textId)
        .addColumn('kind', 'text', (c) => c.notNull().check(oneOf('kind', BILLING_LINK_KINDS)))
        .addColumn('org_id', 'text', org)
        .addColumn('plan_id', 'text')
        .addColumn('return_url', 'text')
        .addColumn('created_at', 'text', required)
        .addColumn('expires_at', 'text', required)
        .addColumn('used_at', 'text'),
      k.schema
        .createTable('entitlement_overrides')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('entitlements', 'text', required)
        .addColumn('effective_from', 'text', required)
        .addColumn('effective_until', 'text')
        .addColumn('created_at', 'text', required),
      k.schema.createIndex('entitlement_overrides_org').on('entitlement_overrides').columns(['org_id', 'effective_from']),
    ],
  },
  {
    version: 2,
    name: 'machines, sessions, input leases, machine events',
    up: (k) => [
      k.schema
        .createTable('machines')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('name', 'text', required)
        .addColumn('size', 'text', (c) => c.notNull().check(oneOf('size', MACHINE_SIZES)))
        .addColumn('template', 'text')
        .addColumn('region', 'text')
        .addColumn('metadata', 'text', required)
        .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', MACHINE_STATES)))
        .addColumn('agent_token', 'text', required)
        .addColumn('created_by_kind', 'text', (c) => c.notNull().check(oneOf('created_by_kind', CREATOR_KINDS)))
        .addColumn('created_by_id', 'text', required)
        .addColumn('created_at', 'text', required)
        .addColumn('updated_at', 'text', required)
        .addColumn('state_changed_at', 'text', required)
        .addColumn('deleted_at', 'text'),
      k.schema.createIndex('machines_org').on('machines').columns(['org_id', 'created_at', 'id']),
      k.schema.createIndex('machines_org_name').unique().on('machines').columns(['org_id', 'name']).where(sql.ref('deleted_at'), 'is', null),
      k.schema
        .createTable('sessions')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('machine_id', 'text', (c) => c.notNull().references('machines.id'))
        .addColumn('type', 'text', (c) => c.notNull().check(oneOf('type', SESSION_TYPES)))
        .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', SESSION_STATES)))
        .addColumn('opener_kind', 'text', (c) => c.notNull().check(oneOf('opener_kind', CREATOR_KINDS)))
        .addColumn('opener_id', 'text', required)
        .addColumn('created_at', 'text', required)
        .addColumn('closed_at', 'text'),
      k.schema.createIndex('sessions_org').on('sessions').columns(['org_id', 'created_at', 'id']),
      k.schema.createIndex('sessions_machine').on('sessions').columns(['machine_id', 'state']),
      k.schema
        .createTable('input_leases')
        .addColumn('machine_id', 'text', (c) => c.primaryKey().references('machines.id'))
        .addColumn('session_id', 'text', (c) => c.references('sessions.id'))
        .addColumn('fence', k.int, required)
        .addColumn('expires_at', k.int, required)
        .addColumn('updated_at', 'text', required),
      k.schema
        .createTable('machine_events')
        .addColumn('seq', k.int, k.serial)
        .addColumn('id', 'text', (c) => c.notNull().unique())
        .addColumn('org_id', 'text', org)
        .addColumn('machine_id', 'text', (c) => c.notNull().references('machines.id'))
        .addColumn('type', 'text', required)
        .addColumn('data', 'text', required)
        .addColumn('created_at', 'text', required),
      k.schema.createIndex('machine_events_machine').on('machine_events').columns(['machine_id', 'seq']),
    ],
  },
  {
    version: 3,
    name: 'snapshots and templates',
    // No foreign key to machines with a cascade: snapshots outlive their machine (machine rows are only
    // soft-deleted anyway). layer_id names the substrate's layer and never leaves the control plane.
    up: (k) => [
      snapshotsTable(k, 'snapshots', SNAPSHOT_ORIGINS_V3),
      ...snapshotsIndexes(k),
      k.schema
        .createTable('templates')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('name', 'text', required)
        .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', TEMPLATE_STATES)))
        .addColumn('source', 'text', (c) => c.notNull().check(oneOf('source', TEMPLATE_SOURCES)))
        .addColumn('size', 'text', (c) => c.notNull().check(oneOf('size', MACHINE_SIZES)))
        .addColumn('snapshot_id', 'text')
        .addColumn('machine_id', 'text')
        .addColumn('layer_id', 'text')
        .addColumn('size_bytes', k.int)
        .addColumn('created_at', 'text', required)
        .addColumn('completed_at', 'text'),
      k.schema.createIndex('templates_org').on('templates').columns(['org_id', 'created_at', 'id']),
    ],
  },
  {
    version: 4,
    name: 'machine secrets (sealed values)',
    up: (k) => [
      k.schema
        .createTable('machine_secrets')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('machine_id', 'text', (c) => c.notNull().references('machines.id'))
        .addColumn('name', 'text', required)
        .addColumn('version', k.int, (c) => c.notNull().check(sql.raw('version >= 1')))
        .addColumn('key_id', 'text', required)
        .addColumn('sealed', k.blob, required)
        .addColumn('value_bytes', k.int, required)
        .addColumn('created_at', 'text', required)
        .addColumn('updated_at', 'text', required)
        .addColumn('delivered_at', 'text')
        .addColumn('delivered_version', k.int)
        .addColumn('delivered_boot', 'text')
        .addUniqueConstraint('machine_secrets_machine_id_name_key', ['machine_id', 'name']),
      k.schema.createIndex('machine_secrets_org').on('machine_secrets').columns(['org_id', 'created_at', 'id']),
      k.schema.createIndex('machine_secrets_key').on('machine_secrets').column('key_id'),
    ],
  },
  {
    version: 5,
    name: 'published ports (previews)',
    // Unpublished rows stay as tombstones (deleted_at): a preview id, and so its hostname, is never
    // issued twice. Credentials are SHA-256 digests only; access_token_hash is cleared when the one-shot
    // access link is used.
    up: (k) => [
      k.schema
        .createTable('previews')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', org)
        .addColumn('machine_id', 'text', (c) => c.notNull().references('machines.id'))
        .addColumn('port', k.int, (c) => c.notNull().check(sql.raw('port BETWEEN 1 AND 65535')))
        .addColumn('name', 'text')
        .addColumn('access', 'text', (c) => c.notNull().check(oneOf('access', PREVIEW_ACCESS)))
        .addColumn('secret_hash', 'text')
        .addColumn('access_token_hash', 'text')
        .addColumn('cookie_hash', 'text')
        .addColumn('last_request_at', 'text')
        .addColumn('created_at', 'text', required)
        .addColumn('deleted_at', 'text'),
      k.schema.createIndex('previews_machine_port').unique().on('previews').columns(['machine_id', 'port']).where(sql.ref('deleted_at'), 'is', null),
      k.schema.createIndex('previews_org').on('previews').columns(['org_id', 'created_at', 'id']),
      k.schema.createIndex('previews_machine').on('previews').columns(['machine_id', 'created_at', 'id']),
    ],
  },
  {
    version: 6,
    name: 'usage records and meter cursors',
    // One row per (subject, meter, size, UTC hour), grown in place by each flush: a record never straddles
    // an hour. meter_cursors holds, per metered subject, the instant its usage is recorded up to; a flush
    // adds the interval since and moves the cursor in one transaction, so a crash can lose at most the
    // interval in flight and never counts one twice. Quantities are exact integers (byte-seconds too).
    up: (k) => [
      k.schema
        .createTable('usage_records')
        .addColumn('id', 'text', textId)
        .addColumn('org_id', 'text', required)
        .addColumn('source_id', 'text', required)
        .addColumn('machine_id', 'text')
        .addColumn('template_id', 'text')
        .addColumn('meter', 'text', required)
        .addColumn('size', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('hour', 'text', required)
        .addColumn('quantity', k.int, (c) => c.notNull().check(sql.raw('quantity >= 0')))
        .addColumn('updated_at', 'text', required)
        .addUniqueConstraint('usage_records_org_id_source_id_meter_size_hour_key', ['org_id', 'source_id', 'meter', 'size', 'hour']),
      k.schema.createIndex('usage_records_org_hour').on('usage_records').columns(['org_id', 'hour', 'id']),
      k.schema
        .createTable('meter_cursors')
        .addColumn('source_id', 'text', textId)
        .addColumn('kind', 'text', (c) => c.notNull().check(oneOf('kind', METER_CURSOR_KINDS)))
        .addColumn('metered_until', 'text', required),
      k.schema
        .createTable('usage_summaries')
        .addColumn('org_id', 'text', required)
        .addColumn('period_start', 'text', required)
        .addColumn('body', 'text', required)
        .addColumn('created_at', 'text', required)
        .addPrimaryKeyConstraint('usage_summaries_pkey', ['org_id', 'period_start']),
    ],
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
    up: (k) => [
      k.schema
        .createTable('stripe_customers')
        .addColumn('org_id', 'text', textId)
        .addColumn('customer_id', 'text', (c) => c.notNull().unique())
        .addColumn('subscription_id', 'text')
        .addColumn('last_event_created', k.int)
        .addColumn('created_at', 'text', required),
      k.schema
        .createTable('stripe_webhook_events')
        .addColumn('id', 'text', textId)
        .addColumn('type', 'text', required)
        .addColumn('org_id', 'text')
        .addColumn('outcome', 'text', required)
        .addColumn('received_at', 'text', required),
      k.schema
        .createTable('stripe_meter_reports')
        .addColumn('org_id', 'text', required)
        .addColumn('period_start', 'text', required)
        .addColumn('period_end', 'text', required)
        .addColumn('meter', 'text', required)
        .addColumn('reported', k.int, (c) => c.notNull().defaultTo(0))
        .addColumn('pending', k.int)
        .addColumn('closed', k.int, (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('stripe_meter_reports_pkey', ['org_id', 'period_start', 'meter']),
    ],
  },
  {
    version: 8,
    name: 'session activity',
    // When a session was last in use (a gateway channel attached or detached, or its input lease seen
    // live): the idle and expiry sweep counts from here (services/sessions.ts). NULL: its created_at.
    up: (k) => [k.schema.alterTable('sessions').addColumn('last_active_at', 'text')],
  },
  {
    version: 9,
    name: 'volume restarts',
    // Machines a disk-volume recovery stopped and owes a start (services/machines/disk-volume.ts): recorded with the
    // decision to stop them, so a control plane killed before the volume is back still starts them.
    // `stopped_at`: the machine's state_changed_at once the recovery stopped it (NULL until then); a machine
    // that moved since (a user's start or stop) is left as its user left it.
    up: (k) => [k.schema.createTable('volume_restarts').addColumn('machine_id', 'text', textId).addColumn('stopped_at', 'text')],
  },
  {
    version: 10,
    name: "snapshot origins are the spec's three",
    // The spec's origins are manual, stop and template; "Before restore" captures were recorded as `restore`.
    // They become `stop` (the restore stops the machine and captures the stopped disk), and the CHECK allows
    // only the three. SQLite cannot change a CHECK in place: the table is rebuilt (nothing references it);
    // PostgreSQL swaps the constraint (named by its default, <table>_<column>_check).
    up: (k) =>
      k.engine === 'sqlite'
        ? [
            snapshotsTable(k, 'snapshots_v10', SNAPSHOT_ORIGINS),
            k.raw(`INSERT INTO snapshots_v10 (id, org_id, machine_id, name, state, origin, layer_id, size_bytes, created_at, completed_at)
  SELECT id, org_id, machine_id, name, state, CASE origin WHEN 'restore' THEN 'stop' ELSE origin END, layer_id, size_bytes,
    created_at, completed_at FROM snapshots`),
            k.schema.dropTable('snapshots'),
            k.schema.alterTable('snapshots_v10').renameTo('snapshots'),
            ...snapshotsIndexes(k),
          ]
        : [
            k.schema.alterTable('snapshots').dropConstraint('snapshots_origin_check'),
            k.raw(`UPDATE snapshots SET origin = 'stop' WHERE origin = 'restore'`),
            k.schema.alterTable('snapshots').addCheckConstraint('snapshots_origin_check', oneOf('origin', SNAPSHOT_ORIGINS)),
          ],
  },
  {
    version: 11,
    name: 'hosts, the machine-to-host link, cluster keys',
    // A host is a DATA_DIR with its substrate (docs/operations.md, "Hosts"). `epoch` is bumped by every driver
    // takeover and by the host being declared down: the fence of the host's machine writes. `capacity` is JSON
    // (domain/host-capacity.ts). machines.host_id NULL: a machine recorded before hosts existed, on the
    // deployment's only host, adopted by that host's first driver (store/repos/hosts.ts). cluster_keys: secrets
    // every process of the deployment shares (the internal channel's key), created once.
    up: (k) => [
      k.schema
        .createTable('hosts')
        .addColumn('id', 'text', textId)
        .addColumn('region', 'text', (c) => c.notNull().defaultTo('default'))
        .addColumn('state', 'text', (c) => c.notNull().check(oneOf('state', HOST_STATES)))
        .addColumn('epoch', k.int, (c) => c.notNull().defaultTo(0))
        .addColumn('internal_url', 'text')
        .addColumn('capacity', 'text', required)
        .addColumn('heartbeat_at', 'text')
        .addColumn('created_at', 'text', required)
        .addColumn('updated_at', 'text', required),
      k.schema.alterTable('machines').addColumn('host_id', 'text', (c) => c.references('hosts.id')),
      k.schema.createIndex('machines_host').on('machines').columns(['host_id', 'state']),
      k.schema
        .createTable('cluster_keys')
        .addColumn('name', 'text', textId)
        .addColumn('key', k.blob, required)
        .addColumn('created_at', 'text', required),
    ],
  },
  {
    version: 12,
    name: 'billing events numbered as recorded',
    // Events of one instant read back in the order they were recorded: SQLite did so by its rowid, PostgreSQL has no
    // such column and fell back to the random id. `seq` (strictly increasing, never reused, as machine_events') is
    // that order on both engines and becomes the key; `id` stays unique. Existing rows keep the order they read in:
    // SQLite's seq is the row's rowid; PostgreSQL numbers them by (created_at, id), its order until now. SQLite
    // cannot add a key column in place: the table is rebuilt (nothing references it), `seq` last as PostgreSQL's
    // ADD COLUMN puts it.
    up: (k) =>
      k.engine === 'sqlite'
        ? [
            billingEventsTable(k, 'billing_events_v12').addColumn('seq', k.int, k.serial),
            k.raw(`INSERT INTO billing_events_v12 (id, org_id, type, from_state, to_state, created_at, seq)
  SELECT id, org_id, type, from_state, to_state, created_at, rowid FROM billing_events`),
            k.schema.dropTable('billing_events'),
            k.schema.alterTable('billing_events_v12').renameTo('billing_events'),
          ]
        : [
            k.schema.alterTable('billing_events').addColumn('seq', k.int),
            k.raw(`UPDATE billing_events SET seq = numbered.n FROM
  (SELECT id, row_number() OVER (ORDER BY created_at COLLATE "C", id COLLATE "C") AS n FROM billing_events) AS numbered
  WHERE billing_events.id = numbered.id`),
            k.raw('ALTER TABLE billing_events ALTER COLUMN seq SET NOT NULL'),
            k.raw('ALTER TABLE billing_events ALTER COLUMN seq ADD GENERATED BY DEFAULT AS IDENTITY'),
            // The identity's next value past the numbered rows (setval of NULL, an empty table, changes nothing).
            k.raw(`SELECT setval(pg_get_serial_sequence('billing_events', 'seq'), max(seq)) FROM billing_events`),
            k.schema.alterTable('billing_events').dropConstraint('billing_events_pkey'),
            k.schema.alterTable('billing_events').addUniqueConstraint('billing_events_id_key', ['id']),
            k.schema.alterTable('billing_events').addPrimaryKeyConstraint('billing_events_pkey', ['seq']),
          ],
  },
  {
    version: 13,
    name: 'the host holding a snapshot or template layer',
    // Where a snapshot's layers were captured, and where a template's pin was first taken: the host whose layer
    // store holds them (services/layer-pull.ts moves them to another host that needs them; docs/substrates.md,
    // "Moving disks between hosts"). NULL: recorded before hosts, or with no registry: the deployment's only host,
    // as machines.host_id. No foreign key: a host removed from the registry leaves its snapshots' rows, whose
    // layers are then on a lost host (the pull's 409), and rows are never dropped with it.
    up: (k) => [
      k.schema.alterTable('snapshots').addColumn('host_id', 'text'),
      k.schema.alterTable('templates').addColumn('host_id', 'text'),
    ],
  },
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/** A Kysely that only compiles (its driver refuses to run anything): migrations become SQL text for a runner. */
function compiler(engine: Engine): Kysely<unknown> {
  return new Kysely<unknown>({
    dialect:
      engine === 'sqlite'
        ? {
            createAdapter: () => new SqliteAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (db) => new SqliteIntrospector(db),
            createQueryCompiler: () => new SqliteQueryCompiler(),
          }
        : {
            createAdapter: () => new PostgresAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (db) => new PostgresIntrospector(db),
            createQueryCompiler: () => new PostgresQueryCompiler(),
          },
  });
}

export interface CompiledMigration {
  version: number;
  name: string;
  /** Parameterless SQL statements, in order. */
  statements: string[];
}

/** Every migration as the SQL the engine runs (synchronous: SQLite's runner in db.ts is). */
export function compileMigrations(engine: Engine): CompiledMigration[] {
  const db = compiler(engine);
  const kit: SchemaKit = { engine, schema: db.schema, ...ENGINE_TYPES[engine], raw: (text) => ({ compile: () => sql.raw(text).compile(db) }) };
  return MIGRATIONS.map((m) => ({
    version: m.version,
    name: m.name,
    statements: m.up(kit).map((s) => {
      const q = s.compile();
      if (q.parameters.length) throw new Error(`migration ${m.version}: a statement has parameters (${q.sql})`);
      return q.sql;
    }),
  }));
}

/**
 * The host registry (issue 25 item 1) on Kysely's query builder, one code for SQLite and PostgreSQL.
 *
 * - `takeOver`: a host's newly elected driver registers the host if it is new, then bumps its epoch (its fence),
 *   records its internal URL, region and capacity and heartbeats, and adopts the machines recorded before hosts
 *   existed if it is the deployment's only host. Instants are the database's clock (`DB_NOW`), never a host's.
 * - `heartbeat`: compare-and-set on the driver's epoch; false means the epoch moved (another driver, or the host was
 *   declared down) and the driver must step down.
 * - `sweepDown`: the deployment leader's pass (cluster/jobs.ts, `hosts`): every host silent for HOST_DOWN_AFTER_MS is
 *   marked down with its epoch bumped, each a compare-and-set on the heartbeat, state and epoch it read, in one
 *   transaction with what the caller does about it (its machines to `error`, services/machines/host-loss.ts).
 * - `stillDriving(fence)`: the SQL condition "this host's epoch is still the fence and the host is not down", for
 *   the machine state writes a host's driver makes; `drivenUnder(fence)` adds "and the machine is on that host".
 */
import { expressionBuilder, sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import { z } from 'zod';
import type { HostCapacity } from '../../domain/host-capacity.js';
import { decideLiveness, HOST_DOWN_AFTER_MS } from '../../domain/host-liveness.js';
import { decideHostMove, type HostAction, type HostMove, type HostState } from '../../domain/host-states.js';
import type { Db } from '../db.js';
import type { Engine } from '../engine/migrations.js';
import type { Database } from '../engine/schema.js';

/** pg_advisory_xact_lock key serializing registrations ("chos"): "the only host" is then exact. */
export const HOSTS_REGISTRY_LOCK_KEY = 0x63686f73;

/** The database's current instant as ISO-8601 UTC text with milliseconds (the format every timestamp has). */
const DB_NOW: Record<Engine, RawBuilder<string>> = {
  sqlite: sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`,
  postgres: sql<string>`to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
};

/** A compare-and-set that lost to a concurrent write is read again and retried this many times. */
const CAS_ATTEMPTS = 5;

export const HostCapacitySchema = z.object({
  cores: z.number().int().nonnegative(),
  memory_bytes: z.number().int().nonnegative(),
  disk_bytes: z.number().int().nonnegative(),
  machines: z.record(z.string(), z.number().int().nonnegative()),
});

export interface HostRow {
  id: string;
  region: string;
  state: HostState;
  epoch: number;
  internal_url: string | null;
  capacity: HostCapacity;
  heartbeat_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface HostListing {
  /** The database's clock when the list was read (heartbeat ages count from it). */
  now: string;
  hosts: Array<HostRow & { machines: number }>;
}

export interface HostRegistration {
  id: string;
  region: string;
  capacity: HostCapacity;
  internalUrl: string | null;
}

/** What a driver holds while it drives: the host and the epoch its takeover made. */
export interface HostFence {
  hostId: string;
  epoch: number;
}

export type HostMoveResult = HostMove | { ok: false; reason: 'no_such_host' };

/** A live machine's host as the owner check reads it (cluster/owner-of.ts): its id, and its row if there is one. */
export interface MachineHost {
  /** Null: recorded before hosts existed. */
  hostId: string | null;
  /** The host's state and registered driver; undefined when `hostId` is null or names no host row. */
  host: Pick<HostRow, 'state' | 'internal_url'> | undefined;
}

const HOST_COLUMNS = ['id', 'region', 'state', 'epoch', 'internal_url', 'capacity', 'heartbeat_at', 'created_at', 'updated_at'] as const;

function toRow(r: Omit<HostRow, 'capacity'> & { capacity: string }): HostRow {
  return { ...r, capacity: HostCapacitySchema.parse(JSON.parse(r.capacity)) };
}

const changed = (r: { numUpdatedRows: bigint } | undefined) => (r?.numUpdatedRows ?? 0n) > 0n;

/**
 * "The host's epoch is still `fence.epoch` and it is not down", as a condition any write can carry: a driver that
 * was replaced or declared down writes nothing with it.
 */
export function stillDriving(fence: HostFence): Expression<SqlBool> {
  const eb = expressionBuilder<Database, never>();
  return eb.exists(
    eb
      .selectFrom('hosts as fence_host')
      .select(sql.lit(1).as('one'))
      .where('fence_host.id', '=', fence.hostId)
      .where('fence_host.epoch', '=', fence.epoch)
      .where('fence_host.state', '<>', 'down'),
  );
}

/**
 * A machine row a driver holding `fence` may write: its host still driven under the fence, and the machine recorded
 * on that host (or on none: a machine not placed yet, or recorded before hosts existed). A machine moved to another
 * host meanwhile is not the returning driver's to touch.
 */
export function drivenUnder(fence: HostFence): Expression<SqlBool> {
  const eb = expressionBuilder<Database, 'machines'>();
  return eb.and([stillDriving(fence), eb.or([eb('machines.host_id', '=', fence.hostId), eb('machines.host_id', 'is', null)])]);
}

/**
 * What a process that drives no machine's host may write for a machine a lost host left: the machine is recorded on
 * a host that is `down` (services/machines/lifecycle.ts, a delete while the host is down). The host's return is then
 * fenced out of it by the epoch it bumps, and its reconcile destroys the disk left behind.
 */
export interface LostHostGuard {
  lostHost: true;
}
export const LOST_HOST: LostHostGuard = { lostHost: true };

/** Which condition a machine write carries: a driver's fence, or "its host is down". */
export type MachineWriteGuard = HostFence | LostHostGuard;

export function onDownHost(): Expression<SqlBool> {
  const eb = expressionBuilder<Database, 'machines'>();
  return eb.exists(
    eb
      .selectFrom('hosts as lost_host')
      .select(sql.lit(1).as('one'))
      .whereRef('lost_host.id', '=', 'machines.host_id')
      .where('lost_host.state', '=', 'down'),
  );
}

export function guarded(g: MachineWriteGuard): Expression<SqlBool> {
  return 'lostHost' in g ? onDownHost() : drivenUnder(g);
}

export function hostsRepo(db: Db) {
  const now = DB_NOW[db.engine];
  const get = async (id: string): Promise<HostRow | undefined> => {
    const r = await db.q().selectFrom('hosts').select(HOST_COLUMNS).where('id', '=', id).executeTakeFirst();
    return r && toRow(r);
  };

  /** Reads the host, decides `action` on its state, writes the move if it is one; retried on a lost race. */
  const move = async (id: string, action: HostAction): Promise<HostMoveResult> => {
    for (let attempt = 1; ; attempt++) {
      const row = await get(id);
      if (!row) return { ok: false, reason: 'no_such_host' };
      const decision = decideHostMove(row.state, action);
      if (!decision.ok || !decision.changed) return decision;
      const r = await db
        .q()
        .updateTable('hosts')
        .set({ state: decision.to, updated_at: now })
        .where('id', '=', id)
        .where('state', '=', row.state)
        .where('epoch', '=', row.epoch)
        .executeTakeFirst();
      if (changed(r)) return decision;
      if (attempt >= CAS_ATTEMPTS) throw new Error(`host ${id}: ${action} lost ${CAS_ATTEMPTS} races in a row`);
    }
  };

  /** Every host with its live machine count, in id order, and the database's clock. */
  const list = async (): Promise<HostListing> => {
    const rows = await db
      .q()
      .selectFrom('hosts')
      .select(HOST_COLUMNS)
      .select((eb) => [
        eb
          .selectFrom('machines')
          .select((m) => m.fn.countAll<number>().as('n'))
          .whereRef('machines.host_id', '=', 'hosts.id')
          .where('machines.deleted_at', 'is', null)
          .as('machines'),
        now.as('now'),
      ])
      .execute();
    const at = rows[0]?.now ?? (await sql<{ now: string }>`SELECT ${now} AS now`.execute(db.q())).rows[0]!.now;
    const hosts = rows.map(({ now: _now, machines, ...r }) => ({ ...toRow(r), machines: Number(machines ?? 0) }));
    return { now: at, hosts: hosts.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)) };
  };

  /** Marks `read` down, epoch bumped, if the row is still what was read (heartbeat, state, epoch). */
  const markDown = async (read: HostRow): Promise<boolean> => {
    const decision = decideHostMove(read.state, 'markDown');
    if (!decision.ok) return false;
    return changed(
      await db
        .q()
        .updateTable('hosts')
        .set((eb) => ({ state: decision.to, epoch: eb('epoch', '+', 1), updated_at: now }))
        .where('id', '=', read.id)
        .where('state', '=', read.state)
        .where('epoch', '=', read.epoch)
        .where((eb) => (read.heartbeat_at === null ? eb('heartbeat_at', 'is', null) : eb('heartbeat_at', '=', read.heartbeat_at)))
        .executeTakeFirst(),
    );
  };

  /** A live machine's host and that host's state and driver in one round trip; undefined for no such live machine. */
  const ofMachine = async (machineId: string): Promise<MachineHost | undefined> => {
    const r = await db
      .q()
      .selectFrom('machines')
      .leftJoin('hosts', 'hosts.id', 'machines.host_id')
      .select(['machines.host_id', 'hosts.state', 'hosts.internal_url'])
      .where('machines.id', '=', machineId)
      .where('machines.deleted_at', 'is', null)
      .executeTakeFirst();
    if (!r) return undefined;
    return { hostId: r.host_id, host: r.state !== null ? { state: r.state, internal_url: r.internal_url } : undefined };
  };

  return {
    get,
    list,
    markDown,
    ofMachine,

    /**
     * A driver's takeover (see the header): returns the new epoch, its fence. Registration, the epoch bump and the
     * adoption are one transaction; on PostgreSQL it holds HOSTS_REGISTRY_LOCK_KEY, so of two hosts registering at
     * once the second sees the first.
     */
    takeOver(reg: HostRegistration): Promise<{ epoch: number; adopted: number }> {
      return db.tx(async () => {
        if (db.engine === 'postgres') await sql`SELECT pg_advisory_xact_lock(${HOSTS_REGISTRY_LOCK_KEY})`.execute(db.q());
        const capacity = JSON.stringify(reg.capacity);
        await db
          .q()
          .insertInto('hosts')
          .values({ id: reg.id, region: reg.region, state: 'active', internal_url: reg.internalUrl, capacity, heartbeat_at: null, created_at: now, updated_at: now })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        for (let attempt = 1; ; attempt++) {
          const row = (await get(reg.id))!;
          const decision = decideHostMove(row.state, 'return');
          if (!decision.ok) throw new Error(`host ${reg.id}: a driver cannot return from ${row.state}`);
          const r = await db
            .q()
            .updateTable('hosts')
            .set((eb) => ({
              epoch: eb('epoch', '+', 1),
              state: decision.to,
              region: reg.region,
              capacity,
              internal_url: reg.internalUrl,
              heartbeat_at: now,
              updated_at: now,
            }))
            .where('id', '=', reg.id)
            .where('epoch', '=', row.epoch)
            .where('state', '=', row.state)
            .returning('epoch')
            .executeTakeFirst();
          if (r) {
            const adopted = await db
              .q()
              .updateTable('machines')
              .set({ host_id: reg.id })
              .where('host_id', 'is', null)
              .where((eb) => eb.not(eb.exists(eb.selectFrom('hosts').select(sql.lit(1).as('one')).where('hosts.id', '<>', reg.id))))
              .executeTakeFirst();
            return { epoch: r.epoch, adopted: Number(adopted.numUpdatedRows) };
          }
          if (attempt >= CAS_ATTEMPTS) throw new Error(`host ${reg.id}: the takeover lost ${CAS_ATTEMPTS} races in a row`);
        }
      });
    },

    /** The driver's heartbeat: false when its epoch moved or the host is down (then it steps down). */
    async heartbeat(fence: HostFence): Promise<boolean> {
      return changed(
        await db
          .q()
          .updateTable('hosts')
          .set({ heartbeat_at: now })
          .where('id', '=', fence.hostId)
          .where('epoch', '=', fence.epoch)
          .where('state', '<>', 'down')
          .executeTakeFirst(),
      );
    },

    /** An operator's cordon, uncordon or drain (the drain itself is the deployment leader's job, services/drain.ts). */
    operate: (id: string, action: 'cordon' | 'uncordon' | 'drain'): Promise<HostMoveResult> => move(id, action),

    /**
     * Marks down every host silent for `downAfterMs` (domain/host-liveness.ts, on the database's clock), each with a
     * compare-and-set on the heartbeat, state and epoch read, bumping the epoch, and `whenDown` in the same
     * transaction (one per host: a host is down with everything that follows from it, or not at all); returns the
     * hosts it marked.
     */
    async sweepDown(downAfterMs = HOST_DOWN_AFTER_MS, whenDown?: (host: HostRow) => Promise<void>): Promise<string[]> {
      const { now: at, hosts } = await list();
      const marked: string[] = [];
      for (const h of hosts) {
        const seen = { state: h.state, heartbeatMs: h.heartbeat_at === null ? null : Date.parse(h.heartbeat_at), createdMs: Date.parse(h.created_at) };
        if (!decideLiveness(seen, Date.parse(at), downAfterMs).down) continue;
        const down = await db.tx(async () => {
          if (!(await markDown(h))) return false;
          await whenDown?.(h);
          return true;
        });
        if (down) marked.push(h.id);
      }
      return marked;
    },
  };
}

export type HostsRepo = ReturnType<typeof hostsRepo>;

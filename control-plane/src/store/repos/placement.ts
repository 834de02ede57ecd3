/**
 * Placement's reads (issue 25 item 2; the decision is domain/placement.ts), one code on both engines:
 *
 * - `candidates()`: every registered host with what is placed on it, in one query (hosts left-joined with their live
 *   machines, counted per size: live, and holding compute).
 * - `lockHost(id)`: inside the transaction that admits a machine on host `id`, `SELECT … FOR NO KEY UPDATE` on its row (not FOR UPDATE: machines.host_id's foreign key takes FOR KEY SHARE on it)
 *   (PostgreSQL), so every admission on one host waits for the one before it to commit and then counts its row; on
 *   SQLite a write transaction is serialized whole (BEGIN IMMEDIATE) and nothing is said. Returns the host with its
 *   placed counts, read after the lock, or undefined when the host is not registered.
 *
 * Lock order: an admission takes its organization's row first (services/quotas.ts), then its host's row; nothing
 * takes them the other way round, so two admissions cannot deadlock.
 */
import type { HostCapacity } from '../../domain/host-capacity.js';
import type { HostState } from '../../domain/host-states.js';
import type { PlacedCount } from '../../domain/placement.js';
import type { Db } from '../db.js';
import { HostCapacitySchema } from './hosts.js';
import { dialect } from './dialect.js';
import { COMPUTE_STATES } from './machines.js';

export interface HostPlacement {
  id: string;
  region: string;
  state: HostState;
  capacity: HostCapacity;
  counts: PlacedCount[];
}

export function placementRepo(db: Db) {
  const d = dialect(db.engine);
  const read = async (hostId: string | null): Promise<HostPlacement[]> => {
    const rows = await db
      .q()
      .selectFrom('hosts')
      .leftJoin('machines', (j) => j.onRef('machines.host_id', '=', 'hosts.id').on('machines.deleted_at', 'is', null))
      .select(['hosts.id', 'hosts.region', 'hosts.state', 'hosts.capacity', 'machines.size'])
      .select((eb) => [
        eb.fn.count<number>('machines.id').as('live'),
        eb.fn.sum<number>(eb.case().when('machines.state', 'in', COMPUTE_STATES).then(1).else(0).end()).as('compute'),
      ])
      .$if(hostId !== null, (q) => q.where('hosts.id', '=', hostId!))
      .groupBy(['hosts.id', 'hosts.region', 'hosts.state', 'hosts.capacity', 'machines.size'])
      .orderBy('hosts.id', d.asc)
      .execute();
    const hosts = new Map<string, HostPlacement>();
    for (const r of rows) {
      let h = hosts.get(r.id);
      if (!h) {
        h = { id: r.id, region: r.region, state: r.state, capacity: HostCapacitySchema.parse(JSON.parse(r.capacity)), counts: [] };
        hosts.set(r.id, h);
      }
      // A host with no machine has one joined row with a null size.
      if (r.size !== null) h.counts.push({ size: r.size, live: Number(r.live), compute: Number(r.compute ?? 0) });
    }
    return [...hosts.values()];
  };

  return {
    candidates: (): Promise<HostPlacement[]> => read(null),

    async lockHost(id: string): Promise<HostPlacement | undefined> {
      if (d.rowLocks) {
        const locked = await db.q().selectFrom('hosts').select('id').where('id', '=', id).forNoKeyUpdate().executeTakeFirst();
        if (!locked) return undefined;
      }
      return (await read(id))[0];
    },
  };
}

export type PlacementRepo = ReturnType<typeof placementRepo>;

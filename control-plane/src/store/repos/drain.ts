/**
 * What a host's drain records (domain/drain.ts), kept in what exists: the host's `state = draining`, internal
 * `drain.*` events in each machine's event log (never shown to a tenant: store/repos/machines.ts `eventsRepo` reads
 * only the spec's types), and machines.host_id, rewritten once the disk is on the target (`rehome`).
 *
 * - `append(m, expectSeq, …)`: a compare-and-set on the machine's newest drain event: the machine's row is locked,
 *   and the event is recorded only if that newest seq is still `expectSeq`, so two leaders (one stale) never record
 *   the same step twice. Inside the caller's transaction if there is one.
 * - `records(machineId)`: its drain events, oldest first, each parsed and bounded (a malformed row is skipped).
 * - `openMoves()`: machines with a move planned and not finished (a move outlives its machine's host_id change).
 */
import { sql } from 'kysely';
import { z } from 'zod';
import { newId } from '../../../../shared/ids.js';
import { MachineState } from '../../../../shared/schemas/machine.js';
import { DRAIN_EVENT, DRAIN_STEPS, type DrainEventType, type DrainRecord } from '../../domain/drain.js';
import type { Db } from '../db.js';
import { eventsRepo, type MachineRow } from './machines.js';
import { one } from './results.js';

const HostId = z.string().max(64);
const Step = z.enum(DRAIN_STEPS);
const DATA = {
  [DRAIN_EVENT.planned]: z.object({ from: HostId, to: HostId, was: MachineState, steps: z.array(Step).max(DRAIN_STEPS.length), why: z.literal('start').optional() }),
  [DRAIN_EVENT.step]: z.object({ from: HostId, to: HostId, step: Step, phase: z.enum(['begun', 'done']), bytes: z.number().int().nonnegative().nullable(), chain: z.string().max(200).nullable() }),
  [DRAIN_EVENT.waiting]: z.object({ from: HostId, reason: z.string().max(500) }),
  [DRAIN_EVENT.failed]: z.object({ from: HostId, to: HostId, step: Step, code: z.string().max(64), reason: z.string().max(500) }),
  [DRAIN_EVENT.finished]: z.object({ from: HostId, to: HostId, state: MachineState }),
} as const;
const TYPES = Object.values(DRAIN_EVENT);

/** A drain event to record: its type and data (the seq is the log's). */
export type DrainEntry = DrainRecord extends infer R ? (R extends { seq: number } ? Omit<R, 'seq'> : never) : never;

function parse(r: { seq: number; type: string; data: string }): DrainRecord | null {
  const schema = DATA[r.type as DrainEventType];
  if (!schema) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(r.data);
  } catch {
    return null;
  }
  const p = schema.safeParse(raw);
  return p.success ? ({ seq: r.seq, type: r.type, ...p.data } as DrainRecord) : null;
}

export function drainRepo(db: Db) {
  const events = eventsRepo(db);
  const newestSeq = async (machineId: string): Promise<number> =>
    (await db.q().selectFrom('machine_events').select((eb) => eb.fn.max('seq').as('s')).where('machine_id', '=', machineId).where('type', 'in', TYPES)
      .executeTakeFirst())?.s ?? 0;
  return {
    newestSeq,

    async records(machineId: string): Promise<DrainRecord[]> {
      const rows = await db.q().selectFrom('machine_events').select(['seq', 'type', 'data']).where('machine_id', '=', machineId).where('type', 'in', TYPES)
        .orderBy('seq', 'asc').execute();
      return rows.map(parse).filter((r): r is DrainRecord => r !== null);
    },

    /** Drain events of any machine after `afterSeq`, oldest first, with their machine (the admin command follows these). */
    async since(afterSeq: number, limit = 500): Promise<Array<{ machineId: string; record: DrainRecord }>> {
      const rows = await db.q().selectFrom('machine_events').select(['seq', 'type', 'data', 'machine_id']).where('seq', '>', afterSeq).where('type', 'in', TYPES)
        .orderBy('seq', 'asc').limit(limit).execute();
      return rows.flatMap((r) => {
        const record = parse(r);
        return record ? [{ machineId: r.machine_id, record }] : [];
      });
    },

    /** The newest seq of the whole log (where a follower starts). */
    headSeq: async (): Promise<number> => (await db.q().selectFrom('machine_events').select((eb) => eb.fn.max('seq').as('s')).executeTakeFirst())?.s ?? 0,

    /** Machines (live or not) whose newest plan has no `drain.finished` after it. */
    async openMoves(): Promise<string[]> {
      const rows = await db.q().selectFrom('machine_events as p').select('p.machine_id').distinct()
        .where('p.type', '=', DRAIN_EVENT.planned)
        .where((eb) => eb.not(eb.exists(eb.selectFrom('machine_events as f').select(sql.lit(1).as('one'))
          .whereRef('f.machine_id', '=', 'p.machine_id').whereRef('f.seq', '>', 'p.seq').where('f.type', '=', DRAIN_EVENT.finished))))
        .orderBy('p.machine_id').execute();
      return rows.map((r) => r.machine_id);
    },

    /** Records `entry` for `m` if the machine's newest drain event is still `expectSeq`; its seq, or null (lost). */
    append(m: Pick<MachineRow, 'id' | 'org_id'>, expectSeq: number, entry: DrainEntry, at: string): Promise<number | null> {
      return db.tx(async () => {
        let lock = db.q().selectFrom('machines').select('id').where('id', '=', m.id);
        if (db.engine === 'postgres') lock = lock.forNoKeyUpdate();
        if (!(await lock.executeTakeFirst())) return null;
        if ((await newestSeq(m.id)) !== expectSeq) return null;
        const { type, ...data } = entry;
        return events.insert({ id: newId('event'), org_id: m.org_id, machine_id: m.id, type, data: JSON.stringify(data), created_at: at });
      });
    },

    /**
     * The move's one write of machines.host_id: `from` → `to`, only while the machine is still on `from`, live, in the
     * state read, and `to` is not down. False: any of these moved.
     */
    async rehome(id: string, from: string, to: string, state: MachineState, at: string): Promise<boolean> {
      return one(await db.q().updateTable('machines').set({ host_id: to, updated_at: at })
        .where('id', '=', id).where('host_id', '=', from).where('state', '=', state).where('deleted_at', 'is', null)
        .where((eb) => eb.exists(eb.selectFrom('hosts').select(sql.lit(1).as('one')).where('hosts.id', '=', to).where('hosts.state', '<>', 'down')))
        .executeTakeFirst());
    },
  };
}

export type DrainRepo = ReturnType<typeof drainRepo>;

/**
 * The machine event log: append (inside the caller's transaction), list newest first with a cursor,
 * and an in-process publish/subscribe hook for the gateway's live channel. Subscribers are woken by this process's
 * own appends at their commit and, on PostgreSQL, by `wakeMachines` for appends other processes committed.
 *
 * Invariant: subscribers read from the database, never from a copy handed over by the writer, so a
 * subscriber sees exactly the committed events of its machine, in `seq` order, without gaps — even
 * across its own catch-up and an append that rolled back.
 */
import { invalid } from '../../../shared/errors.js';
import { newId } from '../../../shared/ids.js';
import type { EventType } from '../../../shared/schemas/machine.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import type { EventRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';

export interface MachineEvent {
  id: string;
  type: EventType;
  machine_id: string;
  created_at: string;
  data: Record<string, unknown>;
}

/** Who did it: the user or API key behind the request (never a secret). */
export interface Actor {
  type: 'user' | 'api_key' | 'system';
  id: string | null;
}

export interface Delivered {
  /** Pass back to `subscribe` to resume after this event. */
  cursor: string;
  event: MachineEvent;
}

const DEFAULT_LIMIT = 50;
const CATCH_UP_BATCH = 500;

function view(r: EventRow): MachineEvent {
  return { id: r.id, type: r.type as EventType, machine_id: r.machine_id, created_at: r.created_at, data: JSON.parse(r.data) as Record<string, unknown> };
}

export function encodeEventCursor(seq: number): string {
  return Buffer.from(`e${seq}`, 'utf8').toString('base64url');
}

export function decodeEventCursor(cursor: string | undefined, field = 'cursor'): number | null {
  if (cursor === undefined) return null;
  const m = /^e(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw invalid('The cursor is not one this server issued.', [{ field, message: 'invalid cursor' }]);
  return Number(m[1]);
}

export function createEventService(d: { store: Store; now: () => Date }) {
  const { store } = d;
  const subscribers = new Map<string, Set<() => void>>();
  const pending = new Set<string>();
  let scheduled = false;

  /** Wakes the subscribers of `machineIds` once, in a microtask (a burst of appends costs one read each). */
  function wakeLater(machineIds: Iterable<string>): void {
    for (const id of machineIds) if (subscribers.has(id)) pending.add(id);
    if (pending.size && !scheduled) {
      scheduled = true;
      queueMicrotask(wake);
    }
  }

  function wake(): void {
    scheduled = false;
    const ids = [...pending];
    pending.clear();
    for (const id of ids) for (const fn of subscribers.get(id) ?? []) fn();
  }

  return {
    /**
     * Records an event. Call inside the transaction that makes it true; subscribers are woken once it
     * commits (never for an append that rolls back).
     */
    async append(orgId: string, machineId: string, type: EventType, data: Record<string, unknown> = {}): Promise<void> {
      await store.events.insert({ id: newId('event'), org_id: orgId, machine_id: machineId, type, data: JSON.stringify(data), created_at: d.now().toISOString() });
      store.db.afterCommit(() => wakeLater([machineId]));
    },

    /**
     * Wakes this process's subscribers of `machineIds`: events of theirs were committed elsewhere (another
     * control-plane process on PostgreSQL; cluster/events-feed.ts). Each reads from the table by its own cursor.
     */
    wakeMachines(machineIds: Iterable<string>): void {
      wakeLater(machineIds);
    },

    async list(machineId: string, q: { limit?: number; cursor?: string }): Promise<Page<MachineEvent>> {
      const limit = q.limit ?? DEFAULT_LIMIT;
      const rows = await store.events.pageDesc(machineId, decodeEventCursor(q.cursor), limit + 1);
      const more = rows.length > limit;
      const shown = more ? rows.slice(0, limit) : rows;
      return { data: shown.map(view), next_cursor: more ? encodeEventCursor(shown[shown.length - 1]!.seq) : null };
    },

    /** Throws 400 invalid_request for a cursor this server did not issue. */
    validateCursor(cursor: string): void {
      decodeEventCursor(cursor);
    },

    /** A cursor meaning "from now on": events appended after this call. */
    async headCursor(machineId: string): Promise<string> {
      return encodeEventCursor(await store.events.lastSeq(machineId));
    },

    /**
     * Delivers every event of `machineId` after `fromCursor` (null: only new ones), in order, then live
     * ones as they commit. Returns the unsubscribe function.
     *
     * The head (for null) is read by a query issued within this call, so it queues on the store ahead of
     * any append that starts after it. One drain runs at a time per subscriber (a wake during a drain
     * makes it read once more), so deliveries stay in `seq` order without duplicates.
     */
    subscribe(machineId: string, fromCursor: string | null, deliver: (d: Delivered) => void): () => void {
      const start = fromCursor === null ? store.events.lastSeq(machineId) : Promise.resolve(decodeEventCursor(fromCursor) ?? 0);
      let last: number | null = null;
      let closed = false;
      let draining = false;
      let again = false;
      const catchUp = async () => {
        last ??= await start;
        while (!closed) {
          const rows = await store.events.after(machineId, last, CATCH_UP_BATCH);
          for (const r of rows) {
            if (closed) return;
            last = r.seq;
            deliver({ cursor: encodeEventCursor(r.seq), event: view(r) });
          }
          if (rows.length < CATCH_UP_BATCH) return;
        }
      };
      const drain = () => {
        if (draining) {
          again = true;
          return;
        }
        draining = true;
        void (async () => {
          try {
            do {
              again = false;
              await catchUp();
            } while (again && !closed);
          } catch {
            /* store closed (shutdown): nothing more to deliver */
          } finally {
            draining = false;
          }
        })();
      };
      let set = subscribers.get(machineId);
      if (!set) subscribers.set(machineId, (set = new Set()));
      set.add(drain);
      drain();
      return () => {
        closed = true;
        const s = subscribers.get(machineId);
        s?.delete(drain);
        if (s && s.size === 0) subscribers.delete(machineId);
      };
    },
  };
}
export type EventService = ReturnType<typeof createEventService>;

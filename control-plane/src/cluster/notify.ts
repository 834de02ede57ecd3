/**
 * Machine events across processes on PostgreSQL (issue 24 item 3): the table is the truth, LISTEN/NOTIFY only
 * wakes readers. A writer records events with `publishEvents` (store/events-publish.ts) in its transaction; PostgreSQL delivers the NOTIFY
 * only when that transaction commits. A reader (`followEvents`) LISTENs on a dedicated connection and, at every
 * wake-up and after every (re)connect, reads the rows past its cursor in seq order: a notification missed while
 * disconnected costs nothing, the rows are read back from the table. The payload is ignored (a wake-up only).
 *
 * Order: a sequence value is taken before its transaction commits, so two writers could commit seq 6 before seq 5
 * and a reader at cursor 6 would skip 5 for ever. Writers therefore take one transaction-scoped advisory lock
 * before inserting: seqs are assigned and committed in the same order, deployment-wide.
 */
import type { Kysely, Selectable } from 'kysely';
import { causeChain, silentLog, type LogSink } from '../log.js';
import type { Database, MachineEventsTable } from '../store/engine/schema.js';
import { EVENTS_CHANNEL } from '../store/events-publish.js';
import { dedicatedClient, sessionLoop, sleeper } from './session.js';

export type EventRow = Selectable<MachineEventsTable>;

/** The rows after `cursor`, oldest first, at most `limit`. */
export type EventReader = (cursor: number, limit: number) => Promise<EventRow[]>;

export function readEventsAfter(db: Kysely<Database>): EventReader {
  return (cursor, limit) => db.selectFrom('machine_events').selectAll().where('seq', '>', cursor).orderBy('seq').limit(limit).execute();
}

/** A LISTEN session: the OS-facing part, small so the reader's loop does not depend on PostgreSQL. */
export interface ListenSession {
  /** Called at most once, when the session fails by itself. */
  onLost(fn: () => void): void;
  close(): Promise<void>;
}

export type ListenConnector = (onNotify: () => void) => Promise<ListenSession>;

/** A dedicated connection LISTENing on the events channel. */
export function postgresListen(url: string): ListenConnector {
  return async (onNotify) => {
    const session = await dedicatedClient(url, 'computer-events');
    session.client.on('notification', (n) => {
      if (n.channel === EVENTS_CHANNEL) onNotify();
    });
    try {
      await session.client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (e) {
      await session.close();
      throw e;
    }
    return { onLost: session.onLost, close: session.close };
  };
}

export interface EventFeed {
  /** The seq of the last event handed to `onEvents`. */
  readonly cursor: number;
  stop(): Promise<void>;
}

export interface FollowOptions {
  listen: ListenConnector;
  read: EventReader;
  /** Resume after this seq (0: from the first event). */
  from: number;
  /** Called with each batch, in seq order, never concurrently; the cursor moves past a batch once it returns. */
  onEvents(rows: EventRow[]): void | Promise<void>;
  /** Wait before reconnecting after the session failed. Default 1000. */
  retryMs?: number;
  /** Rows read at once. Default 500. */
  batch?: number;
  log?: LogSink;
  onConnected?: () => void;
  onDisconnected?: () => void;
}

export function followEvents(opts: FollowOptions): EventFeed {
  const retryMs = opts.retryMs ?? 1000;
  const batch = opts.batch ?? 500;
  const log = opts.log ?? silentLog;
  let cursor = opts.from;
  let dirty = true;
  const z = sleeper();
  const poke = () => {
    dirty = true;
    z.wake();
  };

  /** Reads and hands over everything past the cursor. */
  const drain = async () => {
    for (;;) {
      const rows = await opts.read(cursor, batch);
      if (!rows.length) return;
      await opts.onEvents(rows);
      cursor = rows[rows.length - 1]!.seq;
      if (rows.length < batch) return;
    }
  };

  const session = async () => {
    let listen: ListenSession | undefined;
    try {
      let lost = false;
      listen = await opts.listen(poke);
      listen.onLost(() => {
        lost = true;
        z.wake();
      });
      opts.onConnected?.();
      dirty = true; // what was recorded while not listening is read back now
      while (!loop.stopping && !lost) {
        if (dirty) {
          dirty = false;
          await drain();
        } else await z.sleep();
      }
    } catch (e) {
      log({ event: 'events.follow_failed', error: causeChain(e) });
    }
    await listen?.close();
    opts.onDisconnected?.();
  };

  const loop = sessionLoop(session, retryMs, z);
  return {
    get cursor() {
      return cursor;
    },
    stop: () => loop.stop(),
  };
}

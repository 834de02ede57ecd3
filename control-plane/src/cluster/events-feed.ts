/**
 * The live events channel across control-plane processes on PostgreSQL (issue 24 item 3): each process follows
 * the deployment's event log from its head at start (cluster/notify.ts's `followEvents`: LISTEN, read back past the
 * cursor at every wake-up and reconnect) and wakes its own subscribers of the machines in each batch. The feed only
 * wakes: a subscriber reads the table by its own cursor (services/events.ts), so order and gaps are the table's,
 * and a batch missed while the LISTEN connection was down is read back when it returns.
 */
import type { LogSink } from '../log.js';
import type { EventService } from '../services/events.js';
import type { Store } from '../store/store.js';
import { followEvents, postgresListen, readEventsAfter, type EventFeed } from './notify.js';

export interface EventsFeedDeps {
  /** The PostgreSQL URL the store runs on (the feed's LISTEN connection is its own). */
  databaseUrl: string;
  store: Store;
  events: Pick<EventService, 'wakeMachines'>;
  log: LogSink;
  /** Wait before reconnecting a lost LISTEN connection. Default notify.ts's. */
  retryMs?: number;
}

export async function startEventsFeed(d: EventsFeedDeps): Promise<EventFeed> {
  return followEvents({
    listen: postgresListen(d.databaseUrl),
    read: readEventsAfter(d.store.db.q()),
    from: await d.store.events.headSeq(),
    onEvents: (rows) => d.events.wakeMachines(new Set(rows.map((r) => r.machine_id))),
    retryMs: d.retryMs,
    log: d.log,
  });
}

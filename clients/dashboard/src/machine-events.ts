/**
 * A machine's events channel (every event once, in log order, reconnected from the last cursor) and what the
 * page learns from it: whether the desktop is up (thumbnails ask for a screenshot only then).
 */
import { useEffect, useState } from 'preact/hooks';
import type { EventsServerMessage } from '../../../shared/schemas/gateway.js';
import { api, openChannel } from './api.js';
import type { Machine, MachineEvent, Page } from './types.js';
import { desktopFromEvents } from './view-logic.js';

export interface EventWatch {
  event(e: MachineEvent): void;
  conn?(state: 'live' | 'reconnecting'): void;
}

/** Opens the machine's live events (only events after the handshake); returns the stop function. */
export function watchEvents(machineId: string, on: EventWatch): () => void {
  let ws: WebSocket | null = null;
  let closed = false;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let cursor: string | null = null;
  const connect = () => {
    ws = openChannel(`/v1/machines/${machineId}/events/live${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (!ws) return;
    ws.onopen = () => on.conn?.('live');
    ws.onmessage = (ev) => {
      const m = JSON.parse(String(ev.data)) as EventsServerMessage;
      if (m.type !== 'event') return;
      cursor = m.cursor;
      on.event(m.event as MachineEvent);
    };
    ws.onclose = () => {
      if (closed) return;
      on.conn?.('reconnecting');
      retry = setTimeout(connect, 2000);
    };
  };
  connect();
  return () => {
    closed = true;
    clearTimeout(retry);
    ws?.close();
  };
}

/**
 * Whether the running machine's desktop is up: `machine.ready` since it last began running, read from the
 * log (newest first, paged until it decides) and then from the live channel (opened first, so nothing falls
 * between the two). While it is down nothing is asked of the desktop, so no request fails.
 */
export function useDesktopUp(machine: Machine): boolean {
  const [up, setUp] = useState(false);
  useEffect(() => {
    let stopped = false;
    let decidedLive = false;
    const since = machine.state_changed_at;
    const unwatch = watchEvents(machine.id, {
      event(e) {
        const r = desktopFromEvents([e], since);
        if (!r) return;
        decidedLive = true;
        setUp(r === 'up');
      },
    });
    void (async () => {
      let cursor: string | null = null;
      for (;;) {
        const page: Page<MachineEvent> = await api('GET', `/v1/machines/${machine.id}/events?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        if (stopped || decidedLive) return;
        const r = desktopFromEvents(page.data, since);
        if (r) return setUp(r === 'up');
        if (!page.next_cursor) return;
        cursor = page.next_cursor;
      }
    })().catch(() => {});
    return () => {
      stopped = true;
      unwatch();
    };
  }, [machine.id, machine.state_changed_at]);
  return up;
}

/** Events tab: the latest events, then live ones from the gateway's events channel (newest on top). */
import { useEffect, useState } from 'preact/hooks';
import type { EventsServerMessage } from '../../../../shared/schemas/gateway.js';
import { api, wsUrl } from '../api.js';
import type { Machine, MachineEvent, Page } from '../types.js';

export function EventsTab({ machine }: { machine: Machine }) {
  const [events, setEvents] = useState<MachineEvent[]>([]);
  const [conn, setConn] = useState('connecting');
  useEffect(() => {
    let ws: WebSocket | null = null;
    let closed = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let cursor: string | null = null;
    const seen = new Set<string>();
    const add = (e: MachineEvent) => {
      if (seen.has(e.id)) return;
      seen.add(e.id);
      setEvents((old) => [e, ...old].slice(0, 500));
    };
    const connect = () => {
      ws = new WebSocket(wsUrl(`/v1/machines/${machine.id}/events/live${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`));
      ws.onopen = () => setConn('live');
      ws.onmessage = (ev) => {
        const m = JSON.parse(String(ev.data)) as EventsServerMessage;
        if (m.type !== 'event') return;
        cursor = m.cursor;
        add(m.event as MachineEvent);
      };
      ws.onclose = () => {
        if (closed) return;
        setConn('reconnecting');
        retry = setTimeout(connect, 2000);
      };
    };
    // The channel starts with events after the handshake: open it first, then read the recent past.
    connect();
    api<Page<MachineEvent>>('GET', `/v1/machines/${machine.id}/events?limit=50`).then((p) => [...p.data].reverse().forEach(add), () => {});
    return () => {
      closed = true;
      clearTimeout(retry);
      ws?.close();
    };
  }, [machine.id]);
  const sorted = [...events].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
  return (
    <div class="events">
      <p role="status" aria-label="Events connection">{conn}</p>
      <ol class="timeline" aria-label="Events">
        {sorted.map((e) => (
          <li key={e.id}>
            <time dateTime={e.created_at}>{new Date(e.created_at).toLocaleTimeString()}</time> <code>{e.type}</code>{' '}
            <span class="meta">{summary(e.data)}</span>
          </li>
        ))}
      </ol>
    </div>
  );
}

function summary(d: Record<string, unknown>): string {
  return Object.entries(d)
    .filter(([, v]) => v !== null && typeof v !== 'object')
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join(', ')
    .slice(0, 200);
}

/** Events tab: the latest events, then live ones from the gateway's events channel (newest on top). */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { watchEvents } from '../machine-events.js';
import type { Machine, MachineEvent, Page } from '../types.js';

export function EventsTab({ machine }: { machine: Machine }) {
  const [events, setEvents] = useState<MachineEvent[]>([]);
  const [conn, setConn] = useState<string>('connecting');
  useEffect(() => {
    const seen = new Set<string>();
    const add = (e: MachineEvent) => {
      if (seen.has(e.id)) return;
      seen.add(e.id);
      setEvents((old) => [e, ...old].slice(0, 500));
    };
    // The channel starts with events after the handshake: open it first, then read the recent past.
    const unwatch = watchEvents(machine.id, { event: add, conn: setConn });
    api<Page<MachineEvent>>('GET', `/v1/machines/${machine.id}/events?limit=50`).then((p) => [...p.data].reverse().forEach(add), () => {});
    return unwatch;
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

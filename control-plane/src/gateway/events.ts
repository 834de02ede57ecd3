/**
 * Events channel: the machine's event log, live and in order, from an optional cursor. Events are
 * never dropped (that would be a gap): a client too slow to take them is closed with 4408 and resumes
 * from the last cursor it received.
 */
import type { WebSocket } from 'ws';
import { CLOSE_CODES } from '../../../shared/schemas/gateway.js';
import type { GatewayDeps } from './deps.js';
import { sendJson } from './send.js';

export const DEFAULT_EVENTS_MAX_BUFFERED = 8 * 1024 * 1024;

export function serveEvents(ws: WebSocket, deps: GatewayDeps, machineId: string, cursor: string | null, maxBuffered = DEFAULT_EVENTS_MAX_BUFFERED): void {
  let done = false;
  const unsubscribe = deps.events.subscribe(machineId, cursor, (d) => {
    if (done) return;
    if (ws.bufferedAmount > maxBuffered) {
      stop();
      ws.close(CLOSE_CODES.slow_consumer, 'too slow: resume from your last cursor');
      return;
    }
    sendJson(ws, deps.egress, machineId, { type: 'event', cursor: d.cursor, event: d.event });
  });
  const stop = () => {
    if (done) return;
    done = true;
    unsubscribe();
  };
  ws.once('close', stop);
  // Nothing is expected from the client on this channel.
  ws.on('message', () => {});
}

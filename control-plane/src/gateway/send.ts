/** Sending on a channel socket: every byte that leaves through the gateway is counted for egress. */
import { WebSocket } from 'ws';
import type { EgressMeter } from './deps.js';

export function sendJson(ws: WebSocket, egress: EgressMeter, machineId: string, msg: unknown, cb?: (err?: Error) => void): boolean {
  return sendRaw(ws, egress, machineId, Buffer.from(JSON.stringify(msg), 'utf8'), false, cb);
}

export function sendBinary(ws: WebSocket, egress: EgressMeter, machineId: string, data: Buffer, cb?: (err?: Error) => void): boolean {
  return sendRaw(ws, egress, machineId, data, true, cb);
}

function sendRaw(ws: WebSocket, egress: EgressMeter, machineId: string, data: Buffer, binary: boolean, cb?: (err?: Error) => void): boolean {
  if (ws.readyState !== WebSocket.OPEN) return false;
  ws.send(data, { binary }, cb);
  egress.add(machineId, data.length);
  return true;
}

/** The in-memory egress meter is the metering service's tally (flushed into egress_bytes records). */
export { EgressTally as EgressCounter } from '../services/metering.js';

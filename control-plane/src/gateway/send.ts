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

/** An in-memory egress meter: bytes per machine since the last `take()` (the lead persists them). */
export class EgressCounter implements EgressMeter {
  private readonly bytes = new Map<string, number>();
  add(machineId: string, n: number): void {
    this.bytes.set(machineId, (this.bytes.get(machineId) ?? 0) + n);
  }
  /** Bytes counted for the machine since the last take (without resetting). */
  peek(machineId: string): number {
    return this.bytes.get(machineId) ?? 0;
  }
  /** Returns and resets every machine's count: call it from the metering flush. */
  take(): Map<string, number> {
    const out = new Map(this.bytes);
    this.bytes.clear();
    return out;
  }
}

/**
 * Secret rules as data: when a stored version counts as delivered, and how much one machine may hold.
 * Pure: no I/O.
 */
import type { MachineState } from '../../../shared/schemas/machine.js';
import { MAX_SECRETS_PER_MACHINE, MAX_SECRETS_TOTAL_BYTES } from '../../../shared/schemas/secrets.js';

export interface DeliveryRecord {
  version: number;
  delivered_at: string | null;
  delivered_version: number | null;
  delivered_boot: string | null;
}

/**
 * A secret is delivered when its current version was written into the machine during the boot that is
 * running now. The machine's memory (its tmpfs) goes with every stop, so a delivery from an earlier boot,
 * or of an older version, does not count: `delivered_at` is then null until the next delivery.
 */
export function deliveredAt(r: DeliveryRecord, machine: { state: MachineState; state_changed_at: string }): string | null {
  if (machine.state !== 'running') return null;
  if (r.delivered_version !== r.version || r.delivered_boot !== machine.state_changed_at) return null;
  return r.delivered_at;
}

/** Why storing one more value is refused (null: it fits). `others` leaves out the name being replaced. */
export function capacityRefusal(others: { n: number; bytes: number }, valueBytes: number): string | null {
  if (others.n + 1 > MAX_SECRETS_PER_MACHINE) return `A machine holds at most ${MAX_SECRETS_PER_MACHINE} secrets.`;
  if (others.bytes + valueBytes > MAX_SECRETS_TOTAL_BYTES) {
    return `A machine's secret values total at most ${MAX_SECRETS_TOTAL_BYTES} bytes; these would total ${others.bytes + valueBytes}.`;
  }
  return null;
}

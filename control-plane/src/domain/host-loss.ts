/**
 * Losing a host and getting it back, as data (pure; issue 25 item 5, docs/operations.md "Losing a host").
 *
 * Declared down (the deployment leader's sweep, store/repos/hosts.ts `sweepDown`): in the transaction that marks the
 * host down, every live machine recorded on it gets `host.unhealthy {reason: host_lost}`, and each one the lifecycle
 * table lets `fail` (every state but `error`) moves to `error` with `machine.failed` carrying HOST_LOST_EVENT's data.
 * That event is the record of the cause: nothing in it names the host (the spec's rule).
 *
 * Coming back (the host's next driver, at its takeover): a machine still recorded on the host, still `error`, whose
 * newest `machine.failed` says `host_lost`, is settled by what the host's substrate says of it (HOST_RETURN): its disk
 * is here → `stopped` (`machine.stopped {reason: host_returned}`), honest and startable, never started by itself; a
 * guest that outlived the control plane is stopped first. No disk here → it stays `error`.
 */
import type { MachineState } from '../../../shared/schemas/machine.js';
import type { HostObservation } from './machine-reconcile.js';

/** The cause word tenants see (events, the start refusal): opaque, no host id or address. */
export const HOST_LOST = 'host_lost';
/** The reason of the `machine.stopped` a returned host records. */
export const HOST_RETURNED = 'host_returned';

/** `machine.failed`'s data for a machine whose host was declared down while it was `from`. */
export function hostLostEvent(from: MachineState): { from: MachineState; to: 'error'; operation: 'host'; code: 'compute_unavailable'; reason: typeof HOST_LOST } {
  return { from, to: 'error', operation: 'host', code: 'compute_unavailable', reason: HOST_LOST };
}

/** Did this `machine.failed` data (the newest one of a machine) record a host loss? */
export function failedWithHost(data: Record<string, unknown> | null): boolean {
  return data?.reason === HOST_LOST;
}

export type ReturnAction =
  /** The disk is on this host: record `stopped` (stop the guest first if it still runs). */
  | { do: 'record_stopped'; stopFirst: boolean }
  /** The host has nothing of it: the machine stays `error` with its cause. */
  | { do: 'keep_error' };

/** What a returning host does with a machine it lost, by what its substrate reports now. */
export const HOST_RETURN: Readonly<Record<HostObservation, ReturnAction>> = {
  // A guest that kept running while its control plane was gone: the deployment declared it failed, so it is
  // stopped, never silently kept running or restarted.
  running: { do: 'record_stopped', stopFirst: true },
  stopped: { do: 'record_stopped', stopFirst: false },
  // Runtime state gone (a host reboot), the disk kept: a start makes it again, as after any host reboot.
  lost: { do: 'record_stopped', stopFirst: false },
  absent: { do: 'keep_error' },
};

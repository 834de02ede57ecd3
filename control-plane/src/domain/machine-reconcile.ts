/**
 * What the start-up reconciler does with each machine a previous run left, as data. Pure: imports only shared/.
 *
 * One row per (state the row was left in, what the host says of the machine now). The service
 * (services/machines/reconcile.ts) acts on the row's action and records the outcome by compare-and-set,
 * so a machine this run moved meanwhile is left alone.
 */
import type { MachineState } from '../../../shared/schemas/machine.js';

/** What the host reports of a machine at start-up (the substrate's status; the same four words). */
export type HostObservation = 'running' | 'stopped' | 'lost' | 'absent';

export type ReconcileAction =
  /** Resting, or running as recorded: nothing to settle. */
  | { do: 'nothing' }
  /** Its create never reached the host (or never finished its disk): clean what exists, record `error` (409 at start). */
  | { do: 'clear_interrupted_create' }
  /** A delete was decided: destroy what is left and mark the row deleted. */
  | { do: 'finish_delete' }
  /** A stop was decided: (stop the guest first if it still runs, then) record `stopped`. */
  | { do: 'finish_stop'; stopFirst: boolean }
  /** A boot was decided and the guest runs: record `running` with this trigger, then watch for ready. */
  | { do: 'finish_boot'; trigger: 'substrate_running' | 'boot_complete' }
  /** The host lost what the row says was happening: `error` with `machine.failed {operation}`. */
  | { do: 'fail'; operation: 'create' | 'start' | 'stop' | 'run' }
  /** The user left it running and the host lost it (a host reboot): start it again. */
  | { do: 'recover' };

const NOTHING: ReconcileAction = { do: 'nothing' };
const CLEAR: ReconcileAction = { do: 'clear_interrupted_create' };
const DELETE: ReconcileAction = { do: 'finish_delete' };

/** The table. Every state a row can rest or be caught in, against every observation. */
export const RECONCILE: Readonly<Record<MachineState, Readonly<Record<HostObservation, ReconcileAction>>>> = {
  creating: {
    running: { do: 'finish_boot', trigger: 'substrate_running' },
    stopped: { do: 'fail', operation: 'create' },
    lost: { do: 'fail', operation: 'create' },
    absent: CLEAR,
  },
  starting: {
    running: { do: 'finish_boot', trigger: 'boot_complete' },
    stopped: { do: 'fail', operation: 'start' },
    lost: { do: 'fail', operation: 'start' },
    absent: { do: 'fail', operation: 'start' },
  },
  stopping: {
    running: { do: 'finish_stop', stopFirst: true },
    stopped: { do: 'finish_stop', stopFirst: false },
    lost: { do: 'fail', operation: 'stop' },
    absent: { do: 'fail', operation: 'stop' },
  },
  deleting: { running: DELETE, stopped: DELETE, lost: DELETE, absent: DELETE },
  running: {
    running: NOTHING,
    stopped: { do: 'recover' },
    lost: { do: 'recover' },
    absent: { do: 'fail', operation: 'run' },
  },
  stopped: { running: NOTHING, stopped: NOTHING, lost: NOTHING, absent: CLEAR },
  error: { running: NOTHING, stopped: NOTHING, lost: NOTHING, absent: NOTHING },
};

export function reconcileAction(state: MachineState, seen: HostObservation): ReconcileAction {
  return RECONCILE[state][seen];
}

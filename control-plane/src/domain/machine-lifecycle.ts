/**
 * The machine state machine, as data. Pure: imports only shared/.
 *
 * A service applies a transition with compare-and-set on the stored state (the `from` it read), so of
 * two concurrent lifecycle calls exactly one moves the row and the other gets `conflict` naming both
 * states. `error` is a rest state: it is left only by an explicit start or delete.
 */
import type { MachineState } from '../../../shared/schemas/machine.js';

export type LifecycleTrigger =
  | 'create' // accepted, start requested
  | 'create_stopped' // accepted with start:false
  | 'substrate_running' // creating → running
  | 'stop'
  | 'shutdown_complete'
  | 'start'
  | 'boot_complete'
  | 'restart' // a stop whose completion is followed by a start
  | 'restore' // running or stopped machine gets a new disk; a running one is restarted onto it
  | 'delete'
  | 'exited' // the guest shut itself down cleanly (seen by the substrate watch)
  | 'recover' // the reconciler starts again a machine left running that the host lost (host reboot)
  | 'abandon' // that start failed: the machine rests stopped, with the cause in its event
  | 'host_returned' // its host was declared down (error, cause host_lost) and its driver came back with its disk
  | 'fail';

export interface Transition {
  from: MachineState | null;
  trigger: LifecycleTrigger;
  to: MachineState;
}

/** Every legal move. Anything not listed is refused with `conflict`. */
export const TRANSITIONS: readonly Transition[] = [
  { from: null, trigger: 'create', to: 'creating' },
  { from: null, trigger: 'create_stopped', to: 'stopped' },
  { from: 'creating', trigger: 'substrate_running', to: 'running' },
  { from: 'running', trigger: 'stop', to: 'stopping' },
  { from: 'stopping', trigger: 'shutdown_complete', to: 'stopped' },
  { from: 'stopped', trigger: 'start', to: 'starting' },
  { from: 'error', trigger: 'start', to: 'starting' },
  { from: 'starting', trigger: 'boot_complete', to: 'running' },
  { from: 'running', trigger: 'restart', to: 'stopping' },
  { from: 'running', trigger: 'restore', to: 'stopping' },
  { from: 'stopped', trigger: 'restore', to: 'stopped' },
  { from: 'running', trigger: 'delete', to: 'deleting' },
  { from: 'stopped', trigger: 'delete', to: 'deleting' },
  { from: 'error', trigger: 'delete', to: 'deleting' },
  // A delete during a transient state wins: the act in flight finishes (the disk lock orders them), finds the
  // row moved, and the destroy follows it.
  { from: 'creating', trigger: 'delete', to: 'deleting' },
  { from: 'starting', trigger: 'delete', to: 'deleting' },
  { from: 'stopping', trigger: 'delete', to: 'deleting' },
  { from: 'creating', trigger: 'fail', to: 'error' },
  { from: 'starting', trigger: 'fail', to: 'error' },
  { from: 'stopping', trigger: 'fail', to: 'error' },
  { from: 'running', trigger: 'fail', to: 'error' },
  { from: 'deleting', trigger: 'fail', to: 'error' },
  { from: 'running', trigger: 'exited', to: 'stopped' },
  { from: 'running', trigger: 'recover', to: 'starting' },
  { from: 'starting', trigger: 'abandon', to: 'stopped' },
  // A machine recorded stopped whose disk the host never finished (a crash interrupted a create with start:false).
  { from: 'stopped', trigger: 'fail', to: 'error' },
  // Its host was lost (every state but error failed to error, cause host_lost) and came back with its disk: honest
  // and startable, never started by itself (domain/host-loss.ts).
  { from: 'error', trigger: 'host_returned', to: 'stopped' },
];

/** States a control-plane restart can find a machine in mid-operation; the reconciler settles them. */
export const TRANSIENT_STATES: readonly MachineState[] = ['creating', 'stopping', 'starting', 'deleting'];

export function isTransient(s: MachineState): boolean {
  return TRANSIENT_STATES.includes(s);
}

export type Decision = { ok: true; to: MachineState } | { ok: false; from: MachineState | null; trigger: LifecycleTrigger };

export function decide(from: MachineState | null, trigger: LifecycleTrigger): Decision {
  const t = TRANSITIONS.find((x) => x.from === from && x.trigger === trigger);
  return t ? { ok: true, to: t.to } : { ok: false, from, trigger };
}

/** The states from which `trigger` is legal (used in conflict messages). */
export function sourcesOf(trigger: LifecycleTrigger): MachineState[] {
  return TRANSITIONS.filter((t) => t.trigger === trigger && t.from !== null).map((t) => t.from as MachineState);
}

/** What a refused transition tells the caller: both the current state and what the call needed. */
export function conflictMessage(current: MachineState, trigger: LifecycleTrigger): string {
  const need = sourcesOf(trigger);
  return `Cannot ${trigger.replace('_', ' ')} a machine that is ${current}; it must be ${need.join(' or ')}.`;
}

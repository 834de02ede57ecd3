/**
 * The drain's real seam (services/machine-move.ts `MachineMove`; docs/operations.md "Draining a host"): each step
 * asked of the host that acts it, found as layer-fetch finds a layer's host (`ownerOfHost`: the host's row, its
 * registered driver process and address) — stop and capture of the source's driver, pull, make disk and start of the
 * target's — with a host-to-host call on the move routes (internal-moves.ts). A host this very process drives
 * (`local`) is not called: its acts (services/move-acts.ts) run here. A host nobody serves now (down, taken over, no
 * driver) is `hostCallUnreachable`, so the drain records the step failed and tries it again on its next pass.
 *
 * A live fork placed on another host asks the parent's host for its capture the same way (`createParentDisk`).
 *
 * `ready()` refuses (503, with the operator's reason) when this process has no internal channel or no layer transfer:
 * the drain then plans nothing and no machine is stopped.
 */
import type { z } from 'zod';
import { parseOrThrow } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { actStep, MOVE_ANSWERS, MOVE_BODIES, movePath, type MoveAnswer, type MoveBody, type MoveStep } from '../services/move-steps.js';
import type { MachineMove, MovingMachine } from '../services/machine-move.js';
import type { MoveActs } from '../services/move-acts.js';
import type { ParentDisk } from '../services/live-fork.js';
import type { HostCalls } from './forward/host-call.js';
import type { Owner } from './forward/owner.js';

export interface MachineMoveDeps {
  /** Host calls from this process (forward/host-call.ts); null: no internal channel configured. */
  calls: HostCalls | null;
  /** Who serves a host (owner-of.ts `ownerOfHost`). */
  ownerOfHost(hostId: string): Promise<Owner>;
  /** This process's own host's acts, for a host it drives itself. */
  local: MoveActs;
  /** Whether this deployment's hosts can move layers (the services' layer pull is configured). */
  transfer: boolean;
}

/**
 * `step` of `machine` on `hostId`: acted here with `local` when this process drives that host, else asked of its
 * driver; a host nobody serves now (or no internal channel) is `hostCallUnreachable`.
 */
async function onHost<S extends MoveStep>(
  d: Pick<MachineMoveDeps, 'calls' | 'ownerOfHost'> & { local: MoveActs | null },
  hostId: string,
  machine: string,
  step: S,
  body: MoveBody<S>,
): Promise<MoveAnswer<S>> {
  const owner = await d.ownerOfHost(hostId).catch(() => null);
  if (owner?.kind === 'local' && d.local) return actStep(d.local, machine, step, body);
  if (owner?.kind !== 'remote' || !d.calls) throw ERRORS.hostCallUnreachable();
  const schema: z.ZodType<MoveBody<S>> = MOVE_BODIES[step];
  return d.calls.postJson(owner, movePath(machine, step), parseOrThrow(schema, body), MOVE_ANSWERS[step]);
}

/**
 * A live fork's side of the parent's host (services/live-fork.ts `ParentDisk`), asked of that host's driver on the
 * move routes `fork_capture` and `fork_release`. The fork is made on another host than its parent's, so the parent's
 * host is never this process's own: no local acts (a host this process drives is `hostCallUnreachable`).
 */
export function createParentDisk(d: Pick<MachineMoveDeps, 'calls' | 'ownerOfHost'>): ParentDisk {
  const on = { ...d, local: null };
  return {
    capture: (hostId, parent, fork) => onHost(on, hostId, parent, 'fork_capture', { fork }),
    release: async (hostId, parent, fork) => void (await onHost(on, hostId, parent, 'fork_release', { fork })),
  };
}

export function createMachineMove(d: MachineMoveDeps): MachineMove {
  /** `step` of machine `m` on `hostId`: acted here when this process drives that host, else asked of its driver. */
  const on = <S extends MoveStep>(hostId: string, m: MovingMachine, step: S, body: MoveBody<S>): Promise<MoveAnswer<S>> => onHost(d, hostId, m.id, step, body);
  return {
    async ready() {
      if (!d.calls) throw ERRORS.machineMoveUnconfigured('no internal channel between hosts');
      if (!d.transfer) throw ERRORS.machineMoveUnconfigured('no layer transfer between hosts');
    },
    stop: async (m, from) => void (await on(from, m, 'stop', {})),
    capture: (m, from) => on(from, m, 'capture', { move: m.move }),
    pull: (m, chain, from, to) => on(to, m, 'pull', { move: m.move, from, chain }),
    makeDisk: async (m, chain, to) => void (await on(to, m, 'disk', { chain })),
    start: async (m, to) => void (await on(to, m, 'start', {})),
  };
}

/**
 * A host's state moves, as data (pure). `active`: takes new machines; `cordoned`: keeps its machines, takes no new
 * ones (an operator's `computer-admin hosts cordon`); `draining`: takes no new machines and its machines are being moved
 * away, one at a time, by the deployment leader's drain (services/drain.ts; an operator's `computer-admin hosts drain`); `down`: no heartbeat for HOST_DOWN_AFTER_MS (domain/host-liveness.ts), its epoch bumped so its
 * old driver is fenced off.
 *
 * Each action maps a state to the state it leads to; a state missing from an action's row is a refusal, with the
 * reason in HOST_REFUSALS. `return` is a driver taking over (store/repos/hosts.ts `takeOver`): a host that was
 * declared down comes back `active` (the operator cordons it again if it should stay out of placement); any other
 * state is kept.
 */
export const HOST_STATES = ['active', 'cordoned', 'draining', 'down'] as const;
export type HostState = (typeof HOST_STATES)[number];
export type HostAction = 'cordon' | 'uncordon' | 'drain' | 'markDown' | 'return';

export const HOST_TRANSITIONS: Readonly<Record<HostAction, Partial<Readonly<Record<HostState, HostState>>>>> = {
  cordon: { active: 'cordoned', cordoned: 'cordoned' },
  uncordon: { cordoned: 'active', active: 'active' },
  drain: { active: 'draining', cordoned: 'draining', draining: 'draining' },
  markDown: { active: 'down', cordoned: 'down', draining: 'down' },
  return: { active: 'active', cordoned: 'cordoned', draining: 'draining', down: 'active' },
};

/** Why an action is refused in a state (the states an action's row lacks). */
export const HOST_REFUSALS: Readonly<Record<HostAction, Partial<Readonly<Record<HostState, string>>>>> = {
  cordon: {
    draining: 'the host is draining: it already takes no new machines',
    down: 'the host is down: it takes no new machines until its driver returns (then cordon it)',
  },
  uncordon: {
    draining: 'the host is draining: uncordoning it would place machines on a host being emptied',
    down: 'the host is down: it becomes active when its driver returns',
  },
  drain: { down: 'the host is down: its disks cannot be moved off it (drain it once its driver returns)' },
  markDown: { down: 'the host is already down' },
  return: {},
};

export type HostMove = { ok: true; from: HostState; to: HostState; changed: boolean } | { ok: false; from: HostState; reason: string };

export function decideHostMove(from: HostState, action: HostAction): HostMove {
  const to = HOST_TRANSITIONS[action][from];
  if (to === undefined) return { ok: false, from, reason: HOST_REFUSALS[action][from] ?? `${action} is not allowed from ${from}` };
  return { ok: true, from, to, changed: to !== from };
}

/** May a host in `state` take new machines (placement, later)? */
export function takesNewMachines(state: HostState): boolean {
  return state === 'active';
}

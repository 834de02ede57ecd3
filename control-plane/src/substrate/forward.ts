/**
 * Forwarders over the substrate's ports (timed.ts, machine-host.ts): an object whose listed calls each go
 * through one function, so a forwarder states what it does to a call once, not once per member. The lists
 * are the ports' own (substrate.ts COMPUTE_CALLS, …), checked against the ports at compile time.
 */

type Call = (...args: never[]) => unknown;
/** The names of T's members that are functions. */
export type CallsOf<T> = { [K in keyof T]-?: T[K] extends Call ? K : never }[keyof T];

/**
 * `names` of T, each calling `through(name, args)`. The one cast of the forwarders is here: a member picked
 * by a name known only as a union has no single signature TypeScript can call; `through` returns what the
 * named member returns (callOn below), which is what Pick<T, K> states.
 */
export function forwarder<T, K extends CallsOf<T>>(names: readonly K[], through: (name: K, args: unknown[]) => unknown): Pick<T, K> {
  const out: Partial<Record<K, unknown>> = {};
  for (const name of names) out[name] = (...args: unknown[]) => through(name, args);
  return out as Pick<T, K>;
}

/** Call `target[name](...args)` with `this` bound to the target (drivers are classes). */
export function callOn<T, K extends CallsOf<T>>(target: T, name: K, args: unknown[]): unknown {
  const f = target[name] as unknown as (...a: unknown[]) => unknown;
  return f.apply(target, args);
}

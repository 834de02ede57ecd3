/**
 * The seam between the forward and the rest of the control plane: who serves a machine, and what a process does
 * with a request for it, as data. `OwnerOf` is wired to the store later (the process that drives the machine's
 * host, from the hosts table); `route` is what the API, the gateway and the previews call before serving.
 *
 * | arrived on            | owner     | decision                                                       |
 * |-----------------------|-----------|----------------------------------------------------------------|
 * | the tenant-facing port| local     | serve                                                          |
 * | the tenant-facing port| remote    | forward to the owner                                           |
 * | the internal channel  | local     | serve                                                          |
 * | the internal channel  | remote    | refuse 503 (the owner changed in flight; never a second hop)   |
 * | either                | unknown   | refuse 503 (OwnerOf failed: the database is out of reach)      |
 */
import type { AppError } from '../../../../shared/errors.js';
import { ERRORS } from '../../errors.js';

/** Who serves a machine: this process, or another one of the deployment at an internal address. */
export type Owner = { kind: 'local' } | RemoteOwner;
export interface RemoteOwner {
  kind: 'remote';
  processId: string;
  /** The owner's internal listener, `http://host:port` (INTERNAL_HOST and INTERNAL_PORT as it registered them). */
  address: string;
}

/** Where a machine is served; the lead wires it to the store. It may reject (the store is unreachable). */
export type OwnerOf = (machineId: string) => Promise<Owner>;

/** How the request reached this process. */
export type Arrival = 'tenant' | 'forwarded';

export type Route = { kind: 'serve' } | { kind: 'forward'; target: RemoteOwner } | { kind: 'refuse'; error: AppError };

type Decision = 'serve' | 'forward' | 'moved' | 'unreachable';

const DECISIONS: Record<Arrival, Record<Owner['kind'] | 'unknown', Decision>> = {
  tenant: { local: 'serve', remote: 'forward', unknown: 'unreachable' },
  forwarded: { local: 'serve', remote: 'moved', unknown: 'unreachable' },
};

/** The decision for a request that arrived as `arrival` for a machine whose owner is `owner` (null: unknown). */
export function decideRoute(owner: Owner | null, arrival: Arrival): Route {
  const d = DECISIONS[arrival][owner?.kind ?? 'unknown'];
  if (d === 'serve') return { kind: 'serve' };
  if (d === 'forward' && owner?.kind === 'remote') return { kind: 'forward', target: owner };
  return { kind: 'refuse', error: d === 'moved' ? ERRORS.machineOwnerMoved() : ERRORS.machineOwnerUnreachable() };
}

/**
 * Serve or forward a request naming `machineId` (null: the route names no machine, so any process serves it, e.g.
 * listing machines or signing in; a create is placed by the store, which then names the owner to `decideRoute`).
 */
export async function route(ownerOf: OwnerOf, machineId: string | null, arrival: Arrival): Promise<Route> {
  if (machineId === null) return { kind: 'serve' };
  const owner = await ownerOf(machineId).catch(() => null);
  return decideRoute(owner, arrival);
}

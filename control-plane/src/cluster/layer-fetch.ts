/**
 * The services' `LayerFetch` (services/layer-pull.ts) over the internal channel: the host holding a layer is found
 * as owner-of finds a machine's (`ownerOfHost`: the host's row, its registered driver process and address), and
 * asked with a host-to-host call (forward/host-call.ts) on the layer routes (internal-layers.ts). A host nobody
 * serves now (down, taken over, no driver) and one that cannot be reached are both `hostCallUnreachable`; the
 * puller tells a down host from a slow one by the host's row.
 */
import { z } from 'zod';
import { ERRORS } from '../errors.js';
import type { LayerFetch } from '../services/layer-pull.js';
import { LayerId, MAX_FRAMES } from '../substrate/disks/transfer/wire.js';
import type { HostCalls } from './forward/host-call.js';
import type { Owner, RemoteOwner } from './forward/owner.js';

/** A layer id as the layer stores name them (the only thing a host call puts in a layer path or a move body). */
const Chain = z.strictObject({ chain: z.array(LayerId).min(1).max(MAX_FRAMES) });

export function layerFetch(calls: HostCalls, ownerOfHost: (hostId: string) => Promise<Owner>): LayerFetch {
  const target = async (hostId: string): Promise<RemoteOwner> => {
    const owner = await ownerOfHost(hostId).catch(() => null);
    // `local`: this process drives that host, so the layer would be here; the puller never asks then.
    if (owner?.kind !== 'remote') throw ERRORS.hostCallUnreachable();
    return owner;
  };
  /** A layer id as the store names them (never anything else in a path). */
  const id = (layerId: string): string => {
    if (!LayerId.safeParse(layerId).success) throw ERRORS.layerNotFound();
    return layerId;
  };
  const path = (layerId: string) => `/internal/layers/${id(layerId)}`;
  return {
    chain: async (hostId, layerId) => (await calls.getJson(await target(hostId), `${path(layerId)}/chain`, Chain)).chain,
    body: async (hostId, layerId, have) => calls.get(await target(hostId), `${path(layerId)}?have=${have.map(id).join(',')}`),
  };
}

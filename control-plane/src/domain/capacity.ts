/**
 * Host admission control, pure: may one more machine of `adding` resources boot on this host, given
 * what the machines already holding compute have committed? The service counts `committed` inside the
 * transaction that records the boot, so two concurrent boots cannot both take the last room.
 *
 * Rule: for memory and for CPU separately, committed + adding ≤ floor(host total × commit ratio).
 * Memory is a hard resource (a guest that touches all of its memory must get it, or the host's OOM
 * killer picks a victim, possibly the control plane), so its ratio defaults below 1; vCPUs are
 * time-shared and idle desktops use little, so CPU may be overcommitted.
 */
export interface Resources {
  vcpu: number;
  memory_mb: number;
}

export interface CommitRatios {
  memory: number;
  cpu: number;
}

export type CapacityDecision =
  | { ok: true }
  | { ok: false; resource: 'memory' | 'cpu'; committed: number; adding: number; limit: number };

/** How much of each resource may be committed on a host with `host` totals. */
export function capacityLimits(host: Resources, ratios: CommitRatios): Resources {
  return { memory_mb: Math.floor(host.memory_mb * ratios.memory), vcpu: Math.floor(host.vcpu * ratios.cpu) };
}

export function decideCapacity(host: Resources, ratios: CommitRatios, committed: Resources, adding: Resources): CapacityDecision {
  const limit = capacityLimits(host, ratios);
  if (committed.memory_mb + adding.memory_mb > limit.memory_mb) {
    return { ok: false, resource: 'memory', committed: committed.memory_mb, adding: adding.memory_mb, limit: limit.memory_mb };
  }
  if (committed.vcpu + adding.vcpu > limit.vcpu) {
    return { ok: false, resource: 'cpu', committed: committed.vcpu, adding: adding.vcpu, limit: limit.vcpu };
  }
  return { ok: true };
}

/** The resources committed by `counts` machines per size, priced with the catalog's sizes. */
export function committedBy(counts: ReadonlyArray<{ size: string; n: number }>, sizes: ReadonlyArray<{ id: string } & Resources>): Resources {
  let vcpu = 0;
  let memory_mb = 0;
  for (const c of counts) {
    const s = sizes.find((x) => x.id === c.size);
    // A size no longer in the catalog still holds what the largest size holds: never count it as free.
    const r = s ?? sizes.reduce((a, b) => (b.memory_mb > a.memory_mb ? b : a));
    vcpu += r.vcpu * c.n;
    memory_mb += r.memory_mb * c.n;
  }
  return { vcpu, memory_mb };
}

/**
 * What one host can hold (pure), from domain/capacity.ts's model: per size, the most machines of that size alone
 * that fit the host's commit limits (memory × its ratio, CPUs × theirs) and its disk (each machine's disk counted
 * at its full provisioned size, so a disk is never overcommitted). Registered in `hosts.capacity` as JSON.
 */
import { capacityLimits, type CommitRatios } from './capacity.js';

export interface HostShape {
  cores: number;
  memory_bytes: number;
  /** The filesystem holding DATA_DIR (machine disks and layers). */
  disk_bytes: number;
}

export interface HostCapacity extends HostShape {
  /** Machines of each size alone this host can hold. */
  machines: Record<string, number>;
}

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

export function hostCapacity(shape: HostShape, ratios: CommitRatios, sizes: ReadonlyArray<{ id: string; vcpu: number; memory_mb: number; disk_gb: number }>): HostCapacity {
  const limit = capacityLimits({ vcpu: shape.cores, memory_mb: Math.floor(shape.memory_bytes / MIB) }, ratios);
  const machines: Record<string, number> = {};
  for (const s of sizes) {
    machines[s.id] = Math.max(0, Math.min(Math.floor(limit.memory_mb / s.memory_mb), Math.floor(limit.vcpu / s.vcpu), Math.floor(shape.disk_bytes / (s.disk_gb * GIB))));
  }
  return { cores: shape.cores, memory_bytes: shape.memory_bytes, disk_bytes: shape.disk_bytes, machines };
}

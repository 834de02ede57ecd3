/**
 * This host's shape as the registry records it (domain/host-capacity.ts): its CPUs, its memory and the size of the
 * filesystem holding DATA_DIR (machine disks and layers live there). Read from the OS at each takeover.
 */
import fs from 'node:fs';
import os from 'node:os';
import type { HostShape } from '../domain/host-capacity.js';

export function measureHostShape(dataDir: string): HostShape {
  const fsStats = fs.statfsSync(dataDir);
  return { cores: Math.max(1, os.availableParallelism()), memory_bytes: os.totalmem(), disk_bytes: fsStats.blocks * fsStats.bsize };
}

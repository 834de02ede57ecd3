/**
 * A container machine's memory, read from its memory cgroup: what it holds is the cgroup's usage less its
 * inactive file cache (the kernel's "working set", as kubelet counts it). Inactive file pages are clean cache
 * the host reclaims first, under any pressure; everything else is anonymous memory, tmpfs/shm (the guest's
 * /run and /tmp, Xvfb's frame buffer), active cache and kernel memory charged to the cgroup. Summing each
 * process's RSS instead counts shared pages (libraries, the frame buffer) once per process that maps them.
 *
 * One definition for every figure that states a machine's memory (the bench's idle machine, warm-pool
 * members), so they are comparable.
 */

/** The few files of a memory cgroup this needs, as text; null when one cannot be read. */
export type CgroupFileReader = (name: string) => string | null;

export interface CgroupMemory {
  /** Charged to the cgroup (v1 memory.usage_in_bytes, v2 memory.current). */
  usageBytes: number;
  /** Of which inactive file cache (v1 total_inactive_file, v2 inactive_file): reclaimable first. */
  inactiveFileBytes: number;
  /** What the machine holds: usage less inactive file cache, never below zero. */
  workingSetBytes: number;
  /** Anonymous memory (v1 total_rss, v2 anon). */
  anonBytes: number;
  /** tmpfs and shared memory (v1 total_shmem, v2 shmem): in a guest, mostly Xvfb's frame buffer under /run. */
  shmemBytes: number;
  /** Kernel memory charged to the cgroup (v1 memory.kmem.usage_in_bytes, v2 kernel), when the kernel counts it. */
  kernelBytes: number | null;
}

/** `memory.stat`: lines of `name value`; anything else is skipped. */
export function parseMemoryStat(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+) (\d+)$/.exec(line.trim());
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

function count(text: string | null): number | null {
  const t = text?.trim() ?? '';
  return /^\d+$/.test(t) ? Number(t) : null;
}

/**
 * The memory of one cgroup, v1 (`memory.usage_in_bytes` and the hierarchical `total_*` counters, which
 * include any child cgroups) or v2 (`memory.current`, whose `memory.stat` is hierarchical already).
 * Null when the cgroup cannot be read (the machine is not running, or no memory controller).
 */
export function readCgroupMemory(read: CgroupFileReader): CgroupMemory | null {
  const statText = read('memory.stat');
  if (statText === null) return null;
  const stat = parseMemoryStat(statText);
  const v1 = count(read('memory.usage_in_bytes'));
  const usage = v1 ?? count(read('memory.current'));
  if (usage === null) return null;
  const key = (v1Name: string, v2Name: string) => (v1 !== null ? stat.get(`total_${v1Name}`) : stat.get(v2Name)) ?? 0;
  const inactiveFile = key('inactive_file', 'inactive_file');
  return {
    usageBytes: usage,
    inactiveFileBytes: inactiveFile,
    workingSetBytes: Math.max(0, usage - inactiveFile),
    anonBytes: key('rss', 'anon'),
    shmemBytes: key('shmem', 'shmem'),
    kernelBytes: v1 !== null ? count(read('memory.kmem.usage_in_bytes')) : (stat.get('kernel') ?? null),
  };
}

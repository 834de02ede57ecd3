import t from 'tap';
import { parseMemoryStat, readCgroupMemory } from '../../control-plane/src/substrate/container/memory.js';

const MiB = 1024 * 1024;

// A cgroup v1 memory.stat as the kernel writes it (abridged): the cgroup's own counters, then the
// hierarchical total_* ones, which are what a container's cgroup (and any child) holds.
const v1Stat = [
  'cache 50331648',
  'rss 41943040',
  'shmem 16777216',
  'inactive_file 1048576',
  'active_file 2097152',
  'total_cache 58720256',
  'total_rss 44040192',
  'total_shmem 16777216',
  'total_inactive_file 20971520',
  'total_active_file 4194304',
  'hierarchical_memory_limit 4294967296',
].join('\n');

t.test('cgroup v1: usage less the hierarchical inactive file cache', async (t) => {
  const files: Record<string, string> = {
    'memory.stat': v1Stat,
    'memory.usage_in_bytes': '117440512\n',
    'memory.kmem.usage_in_bytes': '8388608\n',
  };
  const m = readCgroupMemory((n) => files[n] ?? null);
  t.same(m, {
    usageBytes: 112 * MiB,
    inactiveFileBytes: 20 * MiB,
    workingSetBytes: 92 * MiB,
    anonBytes: 42 * MiB,
    shmemBytes: 16 * MiB,
    kernelBytes: 8 * MiB,
  });
});

t.test('cgroup v2: memory.current less inactive_file; kernel from memory.stat', async (t) => {
  const files: Record<string, string> = {
    'memory.stat': 'anon 44040192\nfile 58720256\nkernel 6291456\nshmem 16777216\ninactive_file 20971520\nactive_file 4194304\n',
    'memory.current': '117440512\n',
  };
  t.same(readCgroupMemory((n) => files[n] ?? null), {
    usageBytes: 112 * MiB,
    inactiveFileBytes: 20 * MiB,
    workingSetBytes: 92 * MiB,
    anonBytes: 42 * MiB,
    shmemBytes: 16 * MiB,
    kernelBytes: 6 * MiB,
  });
});

t.test('never below zero; unreadable or garbled cgroups are null', async (t) => {
  const racing: Record<string, string> = { 'memory.stat': 'total_inactive_file 2048\n', 'memory.usage_in_bytes': '1024' };
  t.equal(readCgroupMemory((n) => racing[n] ?? null)?.workingSetBytes, 0);
  t.equal(readCgroupMemory(() => null), null);
  const noKernel: Record<string, string> = { 'memory.stat': 'anon 1024\n', 'memory.current': '1024' };
  t.equal(readCgroupMemory((n) => noKernel[n] ?? null)?.kernelBytes, null);
  const garbled: Record<string, string> = { 'memory.stat': v1Stat, 'memory.usage_in_bytes': 'max' };
  t.equal(readCgroupMemory((n) => garbled[n] ?? null), null);
  t.same([...parseMemoryStat('a 1\nnot a line\nb_c 22\n d 3 \n-e 4').entries()], [['a', 1], ['b_c', 22], ['d', 3]]);
});

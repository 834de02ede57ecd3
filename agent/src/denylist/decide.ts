/**
 * The denylist decision: pure, path in, decision out.
 *
 * A denied entry denies itself and everything under it. Because every check below looks at EVERY
 * prefix a path passes through (including prefixes later undone by `..`), "under an entry" reduces
 * to "some prefix equals an entry": `/etc/agent/token/../x` is refused because the walk would
 * touch `/etc/agent/token` on the way. The walker (walk.ts) feeds this function the path as written,
 * every symlink hop and every resolved prefix, so the decision never depends on the filesystem.
 */
import path from 'node:path';

/** What the agent's wiring tells the denylist. Fixed at start; never client input. */
export interface DenySpec {
  /** Where the control plane drops the one-time enrollment secret (container agents; none in a VM). */
  enrollFile?: string;
  /** The agent's channel: unix socket path and its directory, or the virtio-serial port. */
  channelPaths: string[];
  /** The agent's own configuration directory, if it has one. */
  configDir?: string;
  /** Further fixed paths from the agent's wiring (e.g. the secrets directory, substrate credentials). */
  extraPaths?: string[];
}

/**
 * Always denied, whatever the wiring says: the host's channels into the guest (virtio-serial ports,
 * vsock, fw_cfg) and the devices and proc files that expose the agent's memory (and therefore the key in it).
 */
export const BUILTIN_DENIED_PATHS: readonly string[] = [
  '/dev/virtio-ports',
  '/dev/vsock',
  '/dev/vhost-vsock',
  '/sys/firmware/qemu_fw_cfg',
  '/dev/mem',
  '/dev/kmem',
  '/dev/port',
  '/proc/kcore',
  '/proc/self',
  '/proc/thread-self',
];

/**
 * Per-process files under `/proc/<pid>/` (and `/proc/<pid>/task/<tid>/`), denied for every process and
 * every caller, root included, because they expose another process's memory or what it keeps there:
 * `mem` and `map_files` (the memory and the mapped files themselves), `environ` (secrets handed to
 * processes in their environment), `pagemap`, `maps`, `smaps`, `smaps_rollup`, `numa_maps`, `auxv`,
 * `stack`, `syscall` (address-space layout and kernel stacks: what defeats ASLR), and `mountinfo`,
 * `mounts`, `mountstats` (in a container they name the host paths of bind-mount sources: the substrate
 * root, the machine id, layer ids; the files API is what a read-only key reaches). Reading `mem` also
 * failed with EIO at offset 0 (a 500); now it is a clear 403. Exec and terminals as root can still read
 * them, as the spec allows; the files API, which read-only keys reach, cannot.
 */
export const PROC_PRIVATE_FILES: ReadonlySet<string> = new Set([
  'mem', 'map_files', 'environ', 'pagemap', 'maps', 'smaps', 'smaps_rollup', 'numa_maps', 'auxv', 'stack', 'syscall',
  'mountinfo', 'mounts', 'mountstats',
]);

export interface DenyPolicyInput {
  /** Absolute paths (already normalized; the factory adds realpath forms too). */
  paths: Iterable<string>;
  /** The agent's pid: `/proc/<pid>` exposes its memory, fds and environment. */
  agentPid: number;
  /**
   * Whether `/proc/<n>` is one of the agent's threads (threads have their own, unlisted, /proc/<tid>
   * entries with the same memory). Injected so the decision itself stays pure.
   */
  isAgentTask?: (tid: number) => boolean;
}

export interface DenyPolicy {
  /** The denied entry a path touches, or null when the path is allowed. */
  deniedBy(p: string): string | null;
  readonly entries: ReadonlySet<string>;
}

/** Lexical normalization of an absolute path: collapses `//` and `.`, applies `..` (never above `/`). */
export function lexicalNormalize(p: string): string {
  return lexicalPrefixes(p).final;
}

/**
 * Every prefix the lexical walk of `p` passes through, in order, and where it ends.
 * `/a/b/../c` passes `/a`, `/a/b`, `/a/c`; it ends at `/a/c`.
 */
export function lexicalPrefixes(p: string): { prefixes: string[]; final: string } {
  const stack: string[] = [];
  const prefixes: string[] = [];
  for (const c of p.split('/')) {
    if (c === '' || c === '.') continue;
    if (c === '..') {
      stack.pop();
      continue;
    }
    stack.push(c);
    prefixes.push('/' + stack.join('/'));
  }
  return { prefixes, final: '/' + stack.join('/') };
}

const PID_RE = /^[1-9][0-9]{0,9}$/;

export function createDenyPolicy(input: DenyPolicyInput): DenyPolicy {
  const entries = new Set<string>();
  for (const p of input.paths) {
    if (!p.startsWith('/')) throw new Error('denylist entries must be absolute paths');
    const n = lexicalNormalize(p);
    // Denying `/` would deny everything; an entry like that is a wiring bug, not a policy.
    if (n === '/') throw new Error('denylist entry resolves to /');
    entries.add(n);
  }
  for (const p of BUILTIN_DENIED_PATHS) entries.add(p);
  const pidName = String(input.agentPid);

  const deniedPrefix = (prefix: string): boolean => {
    if (entries.has(prefix)) return true;
    const parts = prefix.split('/');
    // /dev/vport* are the virtio-serial character devices behind /dev/virtio-ports/*.
    if (parts.length === 3 && parts[1] === 'dev' && parts[2]!.startsWith('vport')) return true;
    if (parts.length === 3 && parts[1] === 'proc') {
      const n = parts[2]!;
      if (n === pidName) return true;
      if (/^[1-9][0-9]{0,9}$/.test(n) && input.isAgentTask?.(Number(n))) return true;
    }
    // /proc/<pid>/<private> and /proc/<pid>/task/<tid>/<private>, for any process.
    if (parts[1] === 'proc' && PID_RE.test(parts[2] ?? '')) {
      if (parts.length === 4 && PROC_PRIVATE_FILES.has(parts[3]!)) return true;
      if (parts.length === 6 && parts[3] === 'task' && PID_RE.test(parts[4]!) && PROC_PRIVATE_FILES.has(parts[5]!)) return true;
    }
    return false;
  };

  return {
    entries,
    deniedBy(p: string): string | null {
      if (p === '/' || p === '') return null;
      const abs = p.startsWith('/') ? p : '/' + p;
      for (const prefix of lexicalPrefixes(abs).prefixes) {
        if (deniedPrefix(prefix)) return prefix;
      }
      return null;
    },
  };
}

/** The paths a spec denies, before realpath expansion. */
export function specPaths(spec: DenySpec): string[] {
  const out = [...(spec.enrollFile ? [spec.enrollFile] : []), ...spec.channelPaths];
  if (spec.configDir) out.push(spec.configDir);
  if (spec.extraPaths) out.push(...spec.extraPaths);
  for (const p of out) if (!path.posix.isAbsolute(p)) throw new Error('denylist paths must be absolute');
  return out;
}

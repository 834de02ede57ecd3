import fs from 'node:fs';
import { createDenyPolicy, lexicalNormalize, specPaths, type DenyPolicy, type DenySpec } from './decide.js';
import { walk, type DeniedIdentities, type Walked, type WalkOptions } from './walk.js';

export type { DenySpec, DenyPolicy } from './decide.js';
export { createDenyPolicy, lexicalNormalize, lexicalPrefixes, BUILTIN_DENIED_PATHS } from './decide.js';
export type { Walked, WalkOptions, DeniedIdentities } from './walk.js';
export { O_PATH, fdPath, safeClose } from './walk.js';

/** makedev(major, minor) as Linux stat reports it (for the small numbers used here). */
function makedev(major: number, minor: number): number {
  return ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & ~0xff) << 12);
}

/** /dev/mem, /dev/kmem, /dev/port: denied by device number too, so a mknod'ed copy is refused. */
const MEM_DEVICES = [makedev(1, 1), makedev(1, 2), makedev(1, 4)];

export interface Denylist {
  readonly policy: DenyPolicy;
  /** Resolve a client path under the denylist (see walk.ts). */
  walk(p: string, opts?: WalkOptions): Walked;
  /** Record identities of denied objects that appeared since start (e.g. the socket). Adds only. */
  refresh(): void;
  /** The captured identities, to hand to a denylist in a process that cannot stat them (files worker). */
  identities(): { inodes: string[]; rdevs: number[] };
}

export function createDenylist(
  spec: DenySpec,
  opts: { agentPid?: number; identities?: { inodes: string[]; rdevs: number[] } } = {},
): Denylist {
  const agentPid = opts.agentPid ?? process.pid;
  const paths = new Set<string>();
  for (const p of specPaths(spec)) {
    paths.add(lexicalNormalize(p));
    // Also deny where the entry really lives, in case the configured path goes through a symlink.
    try {
      paths.add(fs.realpathSync(p));
    } catch {
      /* not there (yet): its written form is still denied */
    }
  }
  const policy = createDenyPolicy({
    paths,
    agentPid,
    isAgentTask: (tid) => fs.existsSync(`/proc/${agentPid}/task/${tid}`),
  });
  const ids: DeniedIdentities = { inodes: new Set(opts.identities?.inodes), rdevs: new Set([...MEM_DEVICES, ...(opts.identities?.rdevs ?? [])]) };

  // The enrollment secret is denied by path only: it is unlinked within milliseconds of being written, and
  // the inode number it frees is reused by whatever file comes next, which its captured identity would deny.
  const transient = new Set(spec.enrollFile ? [lexicalNormalize(spec.enrollFile)] : []);
  const capture = () => {
    const roots = [...[...policy.entries].filter((p) => !transient.has(p)), `/proc/${agentPid}`];
    try {
      for (const n of fs.readdirSync('/dev')) if (n.startsWith('vport')) roots.push('/dev/' + n);
    } catch {
      /* no /dev listing */
    }
    try {
      for (const n of fs.readdirSync('/dev/virtio-ports')) roots.push('/dev/virtio-ports/' + n);
    } catch {
      /* not a VM */
    }
    for (const p of roots) {
      for (const st of statBoth(p)) {
        // Identity of directories like /proc/<pid> or the config dir catches bind mounts of them.
        ids.inodes.add(`${st.dev}:${st.ino}`);
        if (st.isCharacterDevice() || st.isBlockDevice()) ids.rdevs.add(st.rdev);
      }
    }
  };
  capture();

  return {
    policy,
    walk: (p, o) => walk(p, policy, ids, o),
    refresh: capture,
    identities: () => ({ inodes: [...ids.inodes], rdevs: [...ids.rdevs] }),
  };
}

function statBoth(p: string): fs.Stats[] {
  const out: fs.Stats[] = [];
  try {
    const l = fs.lstatSync(p);
    // The identity of a symlink is not the identity of what it names; only follow-stat counts then.
    if (!l.isSymbolicLink()) out.push(l);
  } catch {
    return out;
  }
  try {
    out.push(fs.statSync(p));
  } catch {
    /* dangling */
  }
  return out;
}

/**
 * What the host kernel says of a container, read from /proc and the cgroup v1 hierarchies without a podman
 * call: the boot a start belongs to, whether a container's cgroup has processes, whether it is frozen, and
 * killing what is left in it. cgroupfs puts podman's containers at /libpod_parent/libpod-<container id>.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The kernel's boot id ('' if unreadable): a container "running" since another boot is lost. */
export function bootId(): string {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** The cgroup (relative to a hierarchy) cgroupfs gives podman's container `ctrId`. */
function containerCgroup(ctrId: string): string {
  return `/libpod_parent/libpod-${ctrId}`;
}

/** The cgroup v1 freezer state file of a container cgroup (as podman or a record names it); '' if not one. */
export function freezerStatePath(cg: string): string {
  return cg && /^\/[A-Za-z0-9_./-]+$/.test(cg) && !cg.includes('..') ? path.join('/sys/fs/cgroup/freezer', cg, 'freezer.state') : '';
}

/** Whether a freezer state file says frozen (or freezing: a freeze that never completed is still one). */
export function frozenState(stateFile: string): boolean {
  try {
    return fs.readFileSync(stateFile, 'utf8').trim() !== 'THAWED';
  } catch {
    return false;
  }
}

/** Whether liveCgroup's answer can be trusted (cgroup v1 freezer with podman's cgroupfs layout). */
export function cgroupsReadable(ctrId: string | undefined): boolean {
  return !!ctrId && fs.existsSync('/sys/fs/cgroup/freezer/libpod_parent');
}

/**
 * The cgroup (relative to a hierarchy) of a container that has running processes, known without a podman
 * call (~40 ms): cgroupfs puts podman's containers at /libpod_parent/libpod-<id>, and the cgroup exists with
 * members only while the container runs. Null when that cannot be told this way.
 */
export function liveCgroup(ctrId: string | undefined): string | null {
  if (!ctrId) return null;
  const cg = containerCgroup(ctrId);
  try {
    return fs.readFileSync(path.join('/sys/fs/cgroup/freezer', cg, 'cgroup.procs'), 'utf8').trim() ? cg : null;
  } catch {
    return null;
  }
}

/** SIGKILL every process left in the container's cgroup (thawed first: a frozen task cannot die). */
export function killCgroup(ctrId: string | undefined): void {
  if (!ctrId) return;
  const cg = containerCgroup(ctrId);
  try {
    fs.writeFileSync(path.join('/sys/fs/cgroup/freezer', cg, 'freezer.state'), 'THAWED');
  } catch {
    /* no freezer cgroup: nothing frozen */
  }
  for (const h of ['freezer', 'pids']) {
    let procs: string[] = [];
    try {
      procs = fs.readFileSync(path.join('/sys/fs/cgroup', h, cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    } catch {
      continue;
    }
    for (const p of procs) {
      try {
        process.kill(Number(p), 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
}
